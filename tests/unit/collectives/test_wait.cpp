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
