// Algorithm selection: a per-call plan. By default the cost model (cost_model.hpp)
// estimates every algorithm that supports the call and the cheapest runs; a tuner plugin
// (COLL_TUNER_PLUGIN) may override that choice; COLL_ALGO forces algorithms, for every
// collective ("ring") or per collective ("allreduce:rd,broadcast:chain"). A forced
// algorithm that does not support a call falls back to the default choice.
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"

namespace coll {

class Config;
class CostContext;
class CostModel;
class JobTopo;
class TunerPlugin;

struct Candidate {
  const Algorithm* algo = nullptr;
  double costUs = 0;  // the model's estimate; infinity where it has none
};

// Every algorithm of the call's collective that supports it on this job, in table order,
// with its estimate: what selection compares (and collective-info --simulate prints).
std::vector<Candidate> candidatesFor(const CostContext& job, const OpArgs& args);
// The cheapest of them (ties and unknown costs go to the earlier entry); null if none.
const Algorithm* cheapest(const std::vector<Candidate>& cands);

class Selector {
 public:
  // Throws collInvalidArgument for a COLL_ALGO naming no known algorithm or collective,
  // or a COLL_TUNER_PLUGIN that cannot be loaded.
  explicit Selector(const Config& cfg);
  ~Selector();
  const Algorithm& select(const Team& comm, const OpArgs& args) const;
  // For a call on device buffers: the device algorithm of its collective (the first in
  // the table), or null for the host-staged path, which runs the host algorithms on
  // copies in host memory. COLL_ALGO forcing a host algorithm of the collective picks
  // the host-staged path; forcing a device algorithm picks it.
  const Algorithm* deviceAlgorithm(OpKind kind) const;
  // Every algorithm that supports the call, in table order, with the model's estimate.
  std::vector<Candidate> candidates(const Team& comm, const OpArgs& args) const;
  // The communicator's cost model, built on first use (the communicator's topology does
  // not exist yet when it makes its selector). Throws collInvalidArgument for a tunable
  // it cannot parse.
  const CostModel& model(const Team& comm) const;
  bool hasTuner() const { return tuner_ != nullptr; }
  // Initialises the tuner plugin for the job (otherwise done on first use); false if
  // there is one and its init failed.
  bool initTuner(const JobTopo& job) const;
  // Unloads the tuner plugin: the cost model alone decides from now on.
  void dropTuner();
  // How many call shapes the model has priced so far (each is priced once, then cached).
  size_t choicesPriced() const;
  // What the tuner plugin picks over a fixed grid of calls (every collective it tunes,
  // 1 B to 16 GiB, a few types and operations): per call, the picked algorithm's index
  // in algorithmTable(). Ranks compare these when a communicator forms.
  std::vector<uint8_t> tunerProbe(const Team& comm) const;
  // Call i of that grid in words: "allreduce of 64 bytes of float32 (sum)".
  static std::string tunerProbeCase(size_t i);

 private:
  std::map<OpKind, const Algorithm*> forced_;
  // Per collective: whether a call that the forced algorithm cannot run was reported.
  mutable std::array<std::atomic<bool>, kNumOpKinds> forcedPassedOver_{};
  // Recent decisions by call shape (the model's answer depends only on it), so that a
  // small message does not pay for pricing every algorithm. Unused with a tuner plugin,
  // which may keep state of its own.
  // Entries are immutable once published and live as long as the selector, so a lookup
  // is one atomic load (no lock on the per-call path).
  struct CachedChoice {
    OpKind kind;
    size_t count;
    collDataType_t dtype;
    collRedOp_t op;
    int root;
    const Algorithm* algo;
  };
  static constexpr size_t kChoiceSlots = 256;
  static size_t choiceSlot(const OpArgs& args);
  static constexpr size_t kMaxChoices = 4096;  // distinct shapes cached, at most
  mutable std::array<std::atomic<const CachedChoice*>, kChoiceSlots> choices_{};
  mutable std::mutex choiceMu_;  // guards choiceStore_ (inserts only)
  mutable std::vector<std::unique_ptr<CachedChoice>> choiceStore_;
  const Algorithm& choose(const Team& comm, const OpArgs& args) const;
  mutable std::once_flag modelOnce_;
  mutable std::unique_ptr<CostModel> model_;
  std::unique_ptr<TunerPlugin> tuner_;
};

// What COLL_ALGO forces, per collective: a bare name applies to every collective that
// has an algorithm of that name, and a later item replaces what an earlier one forced.
// Throws collInvalidArgument for an unknown collective or algorithm.
std::map<OpKind, const Algorithm*> parseForcedAlgorithms(const std::string& spec);
// COLL_ALGO in a form that is equal wherever two spellings force the same algorithms
// ("allreduce:hd,broadcast:tree,"); what the ranks compare when a communicator forms.
std::string forcedAlgorithmsCanonical(const std::string& spec);

// "allreduce", "broadcast", ... as used in COLL_ALGO; false if unknown.
bool parseOpKind(const std::string& text, OpKind* kind);

// Bytes the cost model and tuner plugins see for a call: the buffer for all-reduce,
// broadcast and reduce; one rank's block for the others.
size_t modelBytes(const OpArgs& args);

}  // namespace coll
