#include "base/wait.hpp"

#include <sched.h>
#include <time.h>
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#endif

#include <atomic>
#include <chrono>
#include <climits>

#include "base/config.hpp"
#include "base/error.hpp"

namespace coll {

COLL_PARAM(kSpinCount, "COLL_SPIN_COUNT", "2000", "idle polls spent spinning before a waiter yields");
COLL_PARAM(kMaxSleepUs, "COLL_WAIT_MAX_SLEEP_US", "200", "longest sleep of an idle waiter, in microseconds");
COLL_PARAM(kLateYieldUs, "COLL_WAIT_LATE_YIELD_US", "500",
           "a sched_yield that returns later than this (another process held the CPU; 4 in a row where the job's ranks outnumber the CPUs) turns yielding off for the communicator for 1 s: waiters then sleep in the kernel instead; 0 never turns it off");

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kYieldsOffNs = 1'000'000'000;  // how long late yields turn them off

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

YieldGate YieldGate::fromConfig(const Config& cfg, int lateInARowToStop) {
  const int64_t late = cfg.getInt(kLateYieldUs);
  COLL_CHECK_ARG(late >= 0, kLateYieldUs, "=", late, " must not be negative");
  return YieldGate(late, lateInARowToStop);
}

bool YieldGate::open() const {
  const int64_t until = offUntilNs_.load(std::memory_order_relaxed);
  return until == 0 || nowNs() >= until;
}

void YieldGate::note(int64_t tookNs) {
  if (!closes() || tookNs <= lateNs_) {
    lateInARow_.store(0, std::memory_order_relaxed);
    return;
  }
  if (lateInARow_.fetch_add(1, std::memory_order_relaxed) + 1 >= toStop_) {
    lateInARow_.store(0, std::memory_order_relaxed);
    offUntilNs_.store(nowNs() + kYieldsOffNs, std::memory_order_relaxed);
  }
}

void YieldGate::reset() {
  offUntilNs_.store(0, std::memory_order_relaxed);
  lateInARow_.store(0, std::memory_order_relaxed);
}

void Backoff::yieldTimed() {
  if (!gate_ || !gate_->closes()) {
    sched_yield();
    return;
  }
  const int64_t t0 = nowNs();
  sched_yield();
  gate_->note(nowNs() - t0);
}

int currentCpu() {
#if defined(RSEQ_SIG) && defined(__GLIBC__)
  if (__rseq_size > 0) {
    const auto* rs = reinterpret_cast<const volatile struct rseq*>(
        static_cast<const char*>(__builtin_thread_pointer()) + __rseq_offset);
    const auto cpu = static_cast<int32_t>(rs->cpu_id);
    if (cpu >= 0) return cpu;
  }
#endif
  return sched_getcpu();
}

bool stepOffCpu(int cpu) {
  cpu_set_t allowed;
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
  cpu_set_t others = allowed;
  CPU_CLR(cpu, &others);
  if (CPU_COUNT(&others) == 0) return false;
  // The kernel migrates a thread at once when its own CPU leaves its mask; restoring the
  // mask right after lets the scheduler place it freely again from where it is now.
  if (sched_setaffinity(0, sizeof others, &others) != 0) return false;
  sched_setaffinity(0, sizeof allowed, &allowed);
  return true;
}

Deadline::Deadline(double seconds) {
  if (seconds <= 0 || seconds > 1e9) seconds = 1e9;
  when_ = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

Deadline Deadline::never() { return Deadline(0); }

double Deadline::remainingSeconds() const {
  auto d = when_ - Clock::now();
  double s = std::chrono::duration<double>(d).count();
  return s > 0 ? s : 0;
}

int Deadline::remainingMs() const {
  double ms = remainingSeconds() * 1000.0;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

Backoff::Backoff(const Config& cfg)
    : Backoff(static_cast<int>(cfg.getInt(kSpinCount)), static_cast<int>(cfg.getInt(kMaxSleepUs))) {}

void Backoff::idle() {
  ++n_;
  if (n_ <= spin_) {
    // Now and then give the CPU away while spinning: if the peer we wait for was put on
    // this same CPU (the scheduler places a task woken from a sleep next to its waker)
    // it runs at once, instead of after our whole spin; otherwise sched_yield returns
    // at once. Without it two ranks on two cores sometimes shared one for tens of ms,
    // every operation then costing a whole spin.
    // Every kYieldEvery-th poll reads the clock (YieldGate::open) and maybe yields; the
    // other polls cost nothing more than before.
    if ((n_ & (kYieldEvery - 1)) == 0 && yieldNow()) {
      yieldTimed();
      return;
    }
#if defined(__x86_64__) || defined(__i386__)
    // The first polls go back to back: a small message between two cores arrives within
    // a few hundred ns, and a pause (about 25 ns here) between polls added half its
    // length to the time we saw it. Past that, the pause spares the core (and its
    // hyperthread sibling) while the wait is long anyway.
    if (n_ > kTightSpins) __builtin_ia32_pause();
#endif
    return;
  }
  if (n_ <= spin_ + kYields) {
    if (yieldNow()) {
      yieldTimed();
      return;
    }
    n_ = spin_ + kYields + 1;  // yields are off: straight on to blocking (shouldBlock) or sleeping
  }
  --n_;  // nextSleepUs counts this call
  struct timespec ts = {0, static_cast<long>(nextSleepUs()) * 1000};
  nanosleep(&ts, nullptr);
}

int Backoff::nextSleepUs() {
  ++n_;
  const int us = sleepUs_;
  if (sleepUs_ < maxSleepUs_) sleepUs_ = sleepUs_ * 2 > maxSleepUs_ ? maxSleepUs_ : sleepUs_ * 2;
  return us;
}

}  // namespace coll
