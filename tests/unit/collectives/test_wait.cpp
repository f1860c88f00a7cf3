// The idle policy every wait shares: spin, yield, then sleeps that double up to a cap;
// nextSleepUs follows the same schedule for waiters that sleep in ppoll themselves.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "core/wait.hpp"

namespace coll {
namespace {

TEST(Backoff, SpinsYieldsThenSleepsDoublingToTheCap) {
  Backoff::resetYields();
  Backoff::setLateYieldUs(0);  // a slow yield on a busy machine must not change the schedule
  Backoff b(10, 50);
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
  Backoff::setLateYieldUs(500);
}

// A late yield (another process held the CPU) turns yielding off: the waiter goes from
// spinning straight to blocking, skipping the 64 yields; a fast one changes nothing, and
// so does a late one when the threshold is 0. Where the job oversubscribes the CPUs it
// takes 4 late ones in a row.
TEST(Backoff, ALateYieldSendsWaitersStraightToBlocking) {
  Backoff::resetYields();
  Backoff::setLateYieldUs(500);
  Backoff::noteYield(400'000);  // 400 us: a peer that yielded back
  EXPECT_TRUE(Backoff::yieldsHelp());
  Backoff::setLateYieldUs(0);
  Backoff::noteYield(50'000'000);
  EXPECT_TRUE(Backoff::yieldsHelp()) << "COLL_WAIT_LATE_YIELD_US=0 keeps yields on";

  Backoff::setLateYieldUs(500);
  for (int i = 0; i < 3; ++i) Backoff::noteYield(4'000'000, 4);  // 4 ms: a tick behind a busy process
  EXPECT_TRUE(Backoff::yieldsHelp()) << "an oversubscribed job's rank may keep the CPU a tick";
  Backoff::noteYield(100'000, 4);  // a fast one in between starts the count again
  for (int i = 0; i < 3; ++i) Backoff::noteYield(4'000'000, 4);
  EXPECT_TRUE(Backoff::yieldsHelp());
  Backoff::noteYield(4'000'000, 4);  // the fourth in a row
  EXPECT_FALSE(Backoff::yieldsHelp());
  Backoff::resetYields();
  Backoff::noteYield(4'000'000);  // otherwise one is enough
  EXPECT_FALSE(Backoff::yieldsHelp());
  Backoff b(10, 50);
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(b.shouldBlock()) << "call " << i;
    b.idle();
  }
  EXPECT_FALSE(b.shouldBlock());
  b.idle();  // would have been the first of 64 yields
  EXPECT_TRUE(b.shouldBlock());
  // Yields come back on by themselves (after 1 s) or here by hand; the next waiter yields.
  Backoff::resetYields();
  EXPECT_TRUE(Backoff::yieldsHelp());
  Backoff c(0, 50);
  c.idle();
  EXPECT_FALSE(c.shouldBlock());
  // A waiter that never stops yielding (lateYieldsToStop 0) yields while they are off.
  Backoff::noteYield(4'000'000);
  EXPECT_FALSE(Backoff::yieldsHelp());
  Backoff d(0, 50, /*lateYieldsToStop=*/0);
  d.idle();
  EXPECT_FALSE(d.shouldBlock()) << "this waiter still yields";
  Backoff::resetYields();
  Backoff::setLateYieldUs(500);
}

TEST(Backoff, YieldsComeBackOnAfterASecond) {
  Backoff::resetYields();
  Backoff::setLateYieldUs(500);
  Backoff::noteYield(4'000'000);
  EXPECT_FALSE(Backoff::yieldsHelp());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(Backoff::yieldsHelp());
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
