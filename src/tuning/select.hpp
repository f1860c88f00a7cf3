// Algorithm selection: a per-call plan. The default rule is a size table; COLL_ALGO
// overrides it, for every collective ("ring") or per collective ("allreduce:rd,
// broadcast:chain"). A forced algorithm that does not support a call falls back to
// the default choice.
#pragma once

#include <map>
#include <string>

#include "algorithms/algorithm.hpp"

namespace coll {

class Config;

class Selector {
 public:
  // Throws collInvalidArgument for a COLL_ALGO naming no known algorithm or collective.
  explicit Selector(const Config& cfg);
  const Algorithm& select(const Comm& comm, const OpArgs& args) const;

 private:
  const Algorithm* byName(OpKind kind, const std::string& name) const;
  std::map<OpKind, const Algorithm*> forced_;
  size_t rdMaxBytes_ = 0;
};

// "allreduce", "broadcast", ... as used in COLL_ALGO; false if unknown.
bool parseOpKind(const std::string& text, OpKind* kind);

}  // namespace coll
