// The idle policy every wait shares: spin, yield, then sleeps that double up to a cap;
// nextSleepUs follows the same schedule for waiters that sleep in ppoll themselves.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "base/wait.hpp"

namespace coll {
namespace {

TEST(Backoff, SpinsYieldsThenSleepsDoublingToTheCap) {
  YieldGate never(0);  // a slow yield on a busy machine must not change the schedule
  Backoff b(10, 50, &never);
  for (int i = 0; i < 10 + 64; ++i) {
    EXPECT_FALSE(b.shouldBlock()) << "call " << i;
    b.idle();
  }
  EXPECT_EQ(b.idleCount(), 74);
  std::vector<int> steps;
  for (int i = 0; i < 8; ++i) steps.push_back(b.nextSleepUs());
  EXPECT_EQ(steps, (std::vector<int>{1, 2, 4, 8, 16, 32, 50, 50}));
  EXPECT_EQ(b.idleCount(), 82);
  EXPECT_TRUE(b.shouldBlock());
  // idle() sleeps the next step (50 us, the cap) and counts once.
  auto t0 = std::chrono::steady_clock::now();
  b.idle();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::microseconds(50));
  EXPECT_EQ(b.idleCount(), 83);
  b.reset();
  EXPECT_EQ(b.idleCount(), 0);
  EXPECT_FALSE(b.shouldBlock());
}

// A late yield (another process held the CPU) turns yielding off: the waiter goes from
// spinning straight to blocking, skipping the 64 yields; a fast one changes nothing, and
// so does a late one when the threshold is 0. Where the job oversubscribes the CPUs it
// takes 4 late ones in a row.
TEST(Backoff, ALateYieldSendsWaitersStraightToBlocking) {
  YieldGate one(500, 1);
  one.note(400'000);  // 400 us: a peer that yielded back
  EXPECT_TRUE(one.open());
  YieldGate never(0, 1);
  never.note(50'000'000);
  EXPECT_TRUE(never.open()) << "COLL_WAIT_LATE_YIELD_US=0 keeps yields on";

  YieldGate four(500, 4);
  for (int i = 0; i < 3; ++i) four.note(4'000'000);  // 4 ms: a tick behind a busy process
  EXPECT_TRUE(four.open()) << "an oversubscribed job's rank may keep the CPU a tick";
  four.note(100'000);  // a fast one in between starts the count again
  for (int i = 0; i < 3; ++i) four.note(4'000'000);
  EXPECT_TRUE(four.open());
  four.note(4'000'000);  // the fourth in a row
  EXPECT_FALSE(four.open());
  one.note(4'000'000);  // otherwise one is enough
  EXPECT_FALSE(one.open());
  Backoff b(10, 50, &one);
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(b.shouldBlock()) << "call " << i;
    b.idle();
  }
  EXPECT_FALSE(b.shouldBlock());
  b.idle();  // would have been the first of 64 yields
  EXPECT_TRUE(b.shouldBlock());
  // Yields come back on by themselves (after 1 s) or here by hand; the next waiter yields.
  one.reset();
  EXPECT_TRUE(one.open());
  Backoff c(0, 50, &one);
  c.idle();
  EXPECT_FALSE(c.shouldBlock());
  // A waiter without a gate never stops yielding.
  one.note(4'000'000);
  EXPECT_FALSE(one.open());
  Backoff d(0, 50);
  d.idle();
  EXPECT_FALSE(d.shouldBlock()) << "this waiter still yields";
}

// Each communicator has its own gate: one that saw late yields leaves another's open
// (a single process-wide state used to let the last communicator's setting win).
TEST(Backoff, GatesOfTwoCommunicatorsAreApart) {
  YieldGate a(500, 1), b(0, 1);
  a.note(4'000'000);
  b.note(4'000'000);
  EXPECT_FALSE(a.open());
  EXPECT_TRUE(b.open());
  YieldGate copy = a;  // a copy starts open, with the same settings
  EXPECT_TRUE(copy.open());
  copy.note(4'000'000);
  EXPECT_FALSE(copy.open());
}

TEST(Backoff, YieldsComeBackOnAfterASecond) {
  YieldGate g(500, 1);
  g.note(4'000'000);
  EXPECT_FALSE(g.open());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(g.open());
}

TEST(Deadline, ExpiresAndReportsWhatIsLeft) {
  Deadline soon(0.001);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  EXPECT_TRUE(soon.expired());
  EXPECT_EQ(soon.remainingMs(), 0);
  EXPECT_FALSE(Deadline(0).expired()) << "0 (and negative) mean no limit";
  Deadline later(60);
  EXPECT_FALSE(later.expired());
  EXPECT_GT(later.remainingSeconds(), 59.0);
  EXPECT_FALSE(Deadline::never().expired());
}

}  // namespace
}  // namespace coll
