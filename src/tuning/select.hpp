// Algorithm selection: a per-call plan. By default the cost model (cost_model.hpp)
// estimates every algorithm that supports the call and the cheapest runs; a tuner plugin
// (COLL_TUNER_PLUGIN) may override that choice; COLL_ALGO forces algorithms, for every
// collective ("ring") or per collective ("allreduce:rd,broadcast:chain"). A forced
// algorithm that does not support a call falls back to the default choice.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"

namespace coll {

class Config;
class CostModel;
class TunerPlugin;

struct Candidate {
  const Algorithm* algo = nullptr;
  double costUs = 0;  // the model's estimate; infinity where it has none
};

class Selector {
 public:
  // Throws collInvalidArgument for a COLL_ALGO naming no known algorithm or collective,
  // or a COLL_TUNER_PLUGIN that cannot be loaded.
  explicit Selector(const Config& cfg);
  ~Selector();
  const Algorithm& select(const Comm& comm, const OpArgs& args) const;
  // Every algorithm that supports the call, in table order, with the model's estimate.
  std::vector<Candidate> candidates(const Comm& comm, const OpArgs& args) const;

 private:
  const Algorithm* byName(OpKind kind, const std::string& name) const;
  // Built on first use: the communicator's topology does not exist yet when it makes us.
  const CostModel& model(const Comm& comm) const;

  std::map<OpKind, const Algorithm*> forced_;
  mutable std::once_flag modelOnce_;
  mutable std::unique_ptr<CostModel> model_;
  std::unique_ptr<TunerPlugin> tuner_;
};

// "allreduce", "broadcast", ... as used in COLL_ALGO; false if unknown.
bool parseOpKind(const std::string& text, OpKind* kind);

// Bytes the cost model and tuner plugins see for a call: the buffer for all-reduce,
// broadcast and reduce; one rank's block for the others.
size_t modelBytes(const OpArgs& args);

}  // namespace coll
