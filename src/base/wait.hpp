// Deadlines and the idle policy shared by every wait in the library.
//
// Up to 8 ranks share 2 cores in tests, so a waiter must not burn a core it does not
// own: it spins briefly (cheap when the peer has its own core), then yields, then
// sleeps with a growing interval capped at COLL_WAIT_MAX_SLEEP_US.
//
// Yielding only pays when what runs instead is another rank that soon yields back. Next
// to a process that computes (a data loader, a compiler) a yield hands it the CPU until
// the scheduler's next tick, milliseconds, while our peer, also yielding, waits behind
// it the same way. So every yield is timed; one that comes back later than
// COLL_WAIT_LATE_YIELD_US turns yielding off for the communicator for a second: waiters
// then spin and go straight to sleeping in the kernel (futex, poll), from which the
// data's arrival wakes them at once, ahead of the busy process. Where the job's own
// ranks outnumber the CPUs it takes 4 late yields in a row (YieldGate's lateInARowToStop):
// there yielding is how the ranks take turns, one of them keeps the CPU for a tick now
// and then (late yields of 0.2-4 ms between 4 ranks on 2 cores, the odd one at a time),
// and sleeping instead made their small messages 10x slower; next to a busy process
// nearly every yield is late.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace coll {

class Config;

// The CPU the calling thread runs on now (from the kernel's rseq area where the C library
// registered one: a load; else sched_getcpu), -1 if unknown.
int currentCpu();
// Moves the calling thread off CPU `cpu` where its affinity allows another one, and leaves
// its affinity as it was: for a waiter whose peer keeps running on the same CPU. Waking
// each other through the kernel, two ranks stay on one CPU (the scheduler places a woken
// task next to its waker), while their host may have another CPU free or shared with a
// busy process. Returns whether it moved.
bool stepOffCpu(int cpu);

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Deadline(double seconds);
  static Deadline never();
  bool expired() const { return Clock::now() >= when_; }
  double remainingSeconds() const;
  int remainingMs() const;  // clamped to [0, INT_MAX]

 private:
  Clock::time_point when_;
};

// Whether yielding helps the waiters of one communicator now. A yield that comes back
// later than the threshold (lateInARowToStop of them in a row) means a process that does
// not yield holds the CPU, so yields are turned off for a second; waiters then spin and
// block in the kernel instead. Every communicator has its own (its COLL_WAIT_LATE_YIELD_US
// and its oversubscription decide), shared by its waiters. Thread-safe.
class YieldGate {
 public:
  // lateUs 0: yields are never turned off. lateInARowToStop 0: neither.
  explicit YieldGate(int64_t lateUs = 500, int lateInARowToStop = 1)
      : lateNs_(lateUs > 0 ? lateUs * 1000 : 0), toStop_(lateInARowToStop) {}
  // COLL_WAIT_LATE_YIELD_US from cfg (collInvalidArgument when negative).
  static YieldGate fromConfig(const Config& cfg, int lateInARowToStop);
  YieldGate(const YieldGate& o) : lateNs_(o.lateNs_), toStop_(o.toStop_) {}
  YieldGate& operator=(const YieldGate& o) {
    lateNs_ = o.lateNs_;
    toStop_ = o.toStop_;
    reset();
    return *this;
  }
  // Whether waiters yield now.
  bool open() const;
  // Whether this gate can close at all (a late threshold and a count are set).
  bool closes() const { return lateNs_ > 0 && toStop_ > 0; }
  // Records how long a yield took.
  void note(int64_t tookNs);
  // Opens it again now (tests).
  void reset();

 private:
  int64_t lateNs_;
  int toStop_;
  std::atomic<int64_t> offUntilNs_{0};  // steady clock; 0: open
  std::atomic<int> lateInARow_{0};
};

class Backoff {
 public:
  static constexpr int kYieldEvery = 32;  // spins between two sched_yield calls (power of 2)
  static constexpr int kTightSpins = 128;  // first spins without a pause between polls
  // gate: the communicator's; null yields always (and never times its yields).
  Backoff(int spinCount = 2000, int maxSleepUs = 200, YieldGate* gate = nullptr)
      : spin_(spinCount), maxSleepUs_(maxSleepUs), gate_(gate) {}
  // COLL_SPIN_COUNT and COLL_WAIT_MAX_SLEEP_US from cfg.
  explicit Backoff(const Config& cfg);
  // Call after a progress attempt that moved nothing.
  void idle();
  // Call after a progress attempt that moved something.
  void reset() { n_ = 0; sleepUs_ = 1; }
  // Ends the spinning and yielding phases now: the next idle calls block or sleep.
  void blockNow() {
    if (n_ <= spin_ + kYields) n_ = spin_ + kYields + 1;
  }
  // How many consecutive idle calls so far.
  int idleCount() const { return n_; }
  // Past the spinning and yielding phases: a waiter may block (poll, futex) instead.
  bool shouldBlock() const { return n_ > spin_ + kYields; }
  static constexpr int kYields = 64;  // sched_yield calls between spinning and blocking
  // How long one blocking wait may last, in microseconds.
  int maxSleepUs() const { return maxSleepUs_; }
  // Counts an idle call like idle() and returns the sleep it would take (growing the
  // same way) without sleeping: for a waiter that sleeps in a call of its own (ppoll on
  // the links that have descriptors, while others must be looked at again soon).
  int nextSleepUs();
  int spinCount() const { return spin_; }

 private:
  void yieldTimed();
  bool yieldNow() const { return !gate_ || gate_->open(); }

  int spin_;
  int maxSleepUs_;
  YieldGate* gate_;
  int n_ = 0;
  int sleepUs_ = 1;
};

}  // namespace coll
