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
// COLL_WAIT_LATE_YIELD_US turns yielding off in the whole process for a second: waiters
// then spin and go straight to sleeping in the kernel (futex, poll), from which the
// data's arrival wakes them at once, ahead of the busy process. Where the job's own
// ranks outnumber the CPUs it takes 4 late yields in a row (HotParams::lateYieldsToStop):
// there yielding is how the ranks take turns, one of them keeps the CPU for a tick now
// and then (late yields of 0.2-4 ms between 4 ranks on 2 cores, the odd one at a time),
// and sleeping instead made their small messages 10x slower; next to a busy process
// nearly every yield is late.
#pragma once

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

class Backoff {
 public:
  static constexpr int kYieldEvery = 32;  // spins between two sched_yield calls (power of 2)
  static constexpr int kTightSpins = 128;  // first spins without a pause between polls
  // lateYieldsToStop: late yields in a row that turn yields off (0: never).
  Backoff(int spinCount = 2000, int maxSleepUs = 200, int lateYieldsToStop = 1)
      : spin_(spinCount), maxSleepUs_(maxSleepUs), lateToStop_(lateYieldsToStop) {}
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
  // Whether yields are on in this process now (off for a while after late ones).
  static bool yieldsHelp();
  // Records how long a yield took; the lateInARow-th late one in a row turns yields off.
  // Exposed for tests.
  static void noteYield(int64_t tookNs, int lateInARow = 1);
  // The late-yield threshold (COLL_WAIT_LATE_YIELD_US; 0: yields are never turned off).
  static void setLateYieldUs(int64_t us);
  // Turns yields back on now (tests).
  static void resetYields();
  // How long one blocking wait may last, in microseconds.
  int maxSleepUs() const { return maxSleepUs_; }
  // Counts an idle call like idle() and returns the sleep it would take (growing the
  // same way) without sleeping: for a waiter that sleeps in a call of its own (ppoll on
  // the links that have descriptors, while others must be looked at again soon).
  int nextSleepUs();
  int spinCount() const { return spin_; }

 private:
  void yieldTimed();
  bool yieldNow() const { return lateToStop_ <= 0 || yieldsHelp(); }

  int spin_;
  int maxSleepUs_;
  int lateToStop_;
  int n_ = 0;
  int sleepUs_ = 1;
};

}  // namespace coll
