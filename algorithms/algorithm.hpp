// An algorithm implements one collective. Each lives in its own file, says what it
// supports, so selection (src/tuning) can fall back to another when it does not, and
// prices itself from the cost primitives (src/cost), so selection can compare them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/op.hpp"

namespace coll {

class Team;
class CostContext;

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual const char* name() const = 0;  // "ring", "rd", "chain", ... (what COLL_ALGO names)
  virtual const char* description() const = 0;
  virtual OpKind kind() const = 0;
  // Whether it can run the call on this job (the job, its layouts and the model's
  // parameters: what selection, and collective-info for a job it only simulates, know).
  virtual bool supports(const CostContext& job, const OpArgs& args) const = 0;
  // Estimated microseconds on `bytes`: the buffer (all-reduce, broadcast, reduce), one
  // rank's block (all-gather input, reduce-scatter output, all-to-all per peer, gather
  // input, scatter output). Infinity where the model does not price it: selection then
  // takes it only where COLL_ALGO or a tuner forces it.
  virtual double estimate(const CostContext& cost, size_t bytes) const = 0;
  // Runs the operation to completion in the calling thread. Throws coll::Error.
  virtual void run(Team& comm, const OpArgs& args) const = 0;
  // A device algorithm (algorithms/device): it runs device-buffer calls as jobs of the
  // communicator's stream executor, and no host-buffer call (supports() is false there).
  virtual bool onDevice() const { return false; }
};

// The one-shot all-reduce takes buffers while nranks x bytes stays within this: beyond,
// each rank's n-1 receptions and folds cost more than the rounds they save (measured on
// one host, 3 to 8 ranks: ahead up to 4-8 KiB of buffer with 3-4 ranks, 1 KiB with 8).
inline constexpr size_t kOneShotMaxTotalBytes = 32 << 10;
// ... and communicators of up to this many ranks: each rank posts n-1 messages at once,
// and the cost model prices all n x (n-1) pairs.
inline constexpr int kOneShotMaxRanks = 64;

// Every algorithm built into the library, in preference order per collective.
const std::vector<const Algorithm*>& algorithmTable();
// The algorithm of `kind` named `name`, or null.
const Algorithm* findAlgorithm(OpKind kind, const std::string& name);

}  // namespace coll
