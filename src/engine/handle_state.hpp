// Completion state behind collective::hvd::Handle, shared by the caller's handle and the
// engine's queued entry (or entries, for a grouped allreduce).
#pragma once

#include <functional>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "collective/hvd.hpp"
#include "engine/collectives.hpp"

namespace collective::hvd::detail {

struct HandleState {
  explicit HandleState(int parts = 1, double waitTimeoutSeconds = 0)
      : remaining(parts), timeoutSeconds(waitTimeoutSeconds) {}

  // One part finished; the handle completes when all parts did. The first error wins.
  void finish(collResult_t result, const std::string& message);
  bool isDone();
  // Waits for completion (at most timeoutSeconds when > 0); throws Error on failure.
  void wait();

  std::mutex mu;
  std::condition_variable cv;
  int remaining;
  bool done = false;
  collResult_t code = collSuccess;
  std::string message;
  double timeoutSeconds;
  // Set by the engine that runs the handle: wait() calls it first, so a caller that
  // blocks on its results starts the engine's next round now instead of at the next
  // COLL_CYCLE_TIME tick (nothing more is coming from a caller that waits).
  std::function<void()> nudge;
  // Set with nudge: runs one engine round in the waiting thread; false when it could not
  // (another thread is running one, or the engine stopped), and wait() then sleeps until
  // the engine's thread finishes the work.
  std::function<bool()> drive;

  // Results beyond success, set by the engine before finish().
  Output output;
  int value = -1;                                         // join: last rank to join
  std::unique_ptr<coll::engine::Collectives> collectives;  // add_process_set: the new group
};

}  // namespace collective::hvd::detail
