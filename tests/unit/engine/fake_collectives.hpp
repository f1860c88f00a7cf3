// An in-process stand-in for a communicator: N ranks as threads exchange pointers through
// shared memory. Reductions combine in rank order with the library's own kernels, so
// results are deterministic. Lets the engine be tested without any transport.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/collectives.hpp"

namespace coll::engine::testing {

class FakeWorld : public std::enable_shared_from_this<FakeWorld> {
 public:
  static std::shared_ptr<FakeWorld> create(int n, double timeoutSeconds = 30);
  std::unique_ptr<Collectives> member(int rank);
  int size() const { return n_; }
  // Every all-reduce takes at least this long (a slow network), for latency-driven policy.
  void setAllreduceDelay(std::chrono::microseconds d) { delay_ = d; }
  std::chrono::microseconds allreduceDelay() const { return delay_; }
  // Nonblocking all-reduces read their input only when waited on (as a real transport may
  // read it any time until then), so a caller that frees or reuses it early is caught.
  void setDeferredAllreduce(bool on) { deferred_ = on; }
  bool deferredAllreduce() const { return deferred_; }

  // Publishes `mine` for this rank and returns every rank's pointer once all posted.
  // The caller must call done() after it finished reading the others' data.
  std::vector<const void*> exchange(int rank, const void* mine);
  void done();
  // Split support: rank-indexed slots for handing out the new worlds.
  std::vector<std::shared_ptr<FakeWorld>>& splitSlots() { return split_; }

 private:
  FakeWorld(int n, double timeout) : n_(n), timeout_(timeout), posts_(n), split_(n) {}
  void barrier();
  int n_;
  double timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<const void*> posts_;
  std::vector<std::shared_ptr<FakeWorld>> split_;
  std::atomic<std::chrono::microseconds> delay_{std::chrono::microseconds(0)};
  std::atomic<bool> deferred_{false};
};

// Ranks as threads: runs fn(rank) on n threads and rethrows the first failure.
void runRanks(int n, const std::function<void(int)>& fn);

}  // namespace coll::engine::testing
