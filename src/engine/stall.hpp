// Stall inspector: a tensor some ranks submitted and others did not is the classic
// distributed-training hang (a rank took another branch, or died). After
// COLL_STALL_CHECK_SECONDS it is reported by name with the ranks that are missing; after
// COLL_STALL_SHUTDOWN_SECONDS (when > 0) the engine stops and fails everything pending.
#pragma once

#include <string>
#include <vector>

#include "engine/negotiation.hpp"

namespace coll::engine {

struct StallParams {
  double warnSeconds = 60;
  double shutdownSeconds = 0;  // 0: never
};

class StallInspector {
 public:
  explicit StallInspector(StallParams p) : p_(p) {}
  // Reports due now (at most one batch per warnSeconds); empty when nothing is due.
  std::vector<std::string> check(const Negotiator& n, double now);
  // Non-empty (the reason) when a tensor waited past the shutdown limit.
  std::string shutdownReason(const Negotiator& n, double now) const;
  // The reason as another rank words it: rank 0 decided with its own clock, so this rank
  // names its oldest waiting tensor whatever its age here.
  std::string followerReason(const Negotiator& n, double now) const;
  const StallParams& params() const { return p_; }

  static std::string describe(const Negotiator::Stalled& s, int processSet);
  void setProcessSet(int id) { processSet_ = id; }

 private:
  StallParams p_;
  double lastReport_ = -1e300;
  int processSet_ = 0;
};

}  // namespace coll::engine
