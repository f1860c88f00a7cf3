// The staged / single-copy chooser of shm links (transport/shm/copy_mode.hpp), driven
// with made-up times and rates.
#include <gtest/gtest.h>

#include <vector>

#include "transport/shm/copy_mode.hpp"

namespace coll::shm {
namespace {

using Mode = CopyModeChooser::Mode;
constexpr Mode kStaged = CopyModeChooser::kStaged;
constexpr Mode kSingle = CopyModeChooser::kSingle;
constexpr Mode kStream = CopyModeChooser::kStream;
constexpr int kTrial = CopyModeChooser::kTrialMessages;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kMsg = 512 << 10;

// A chooser probing every 100 ms; `now` starts inside an interval of its own.
struct Chooser : ::testing::Test {
  CopyModeChooser c{100 * kMs};
  uint64_t now = 1000 * kMs + 1;

  // One delivery of n messages of mode m at `rate` bytes/ns.
  void deliver(Mode m, int n, double rate) {
    const uint64_t ns = static_cast<uint64_t>(static_cast<double>(n * kMsg) / rate);
    now += ns;
    c.delivered(m, n, n * kMsg, ns, now);
  }
  // Picks and delivers messages one by one, the staged ones at `staged` bytes/ns and the
  // single-copy ones at `single`, until the next probe interval begins. Returns the picks.
  std::vector<Mode> runInterval(double staged, double single) {
    std::vector<Mode> picks;
    const uint64_t end = (now / (100 * kMs) + 1) * 100 * kMs;
    while (now < end) {
      const Mode m = c.pick(now);
      picks.push_back(m);
      deliver(m, 1, m == kStaged ? staged : single);
    }
    return picks;
  }
  // Picks and delivers 2 x kTrialMessages messages: a trial that is due, and as many of
  // the mode in use after it, which decide it.
  void runTrial(double staged, double single) {
    for (int i = 0; i < 2 * kTrial; ++i) {
      const Mode m = c.pick(now);
      deliver(m, 1, m == kStaged ? staged : single);
    }
  }
  static int count(const std::vector<Mode>& picks, Mode m) {
    int n = 0;
    for (Mode p : picks) n += p == m;
    return n;
  }
};

TEST_F(Chooser, SingleCopyFirstThenTheStagedCopyWinsItsTrial) {
  ASSERT_EQ(c.pick(now), kSingle);  // nothing measured: the single copy first
  ASSERT_EQ(c.pick(now), kSingle) << "no trial before the single copy has a figure";
  deliver(kSingle, 2, 5.0);
  // Then the staged copy, on kTrialMessages messages in a row.
  for (int i = 0; i < kTrial; ++i) ASSERT_EQ(c.pick(now), kStaged) << i;
  ASSERT_EQ(c.pick(now), kSingle) << "the trial is over once it has its messages";
  for (int i = 0; i < kTrial; ++i) deliver(kStaged, 1, 10.0);
  // It is judged against as many single-copy messages after it.
  for (int i = 0; i < kTrial; ++i) {
    EXPECT_EQ(c.current(), kSingle) << "decided before the messages after the trial, at " << i;
    ASSERT_EQ(c.pick(now), kSingle);
    deliver(kSingle, 1, 5.0);
  }
  EXPECT_EQ(c.current(), kStaged);
  EXPECT_NEAR(c.rate(kStaged), 10.0, 0.01);
  // Every later interval: one trial of the single copy, the rest staged.
  runInterval(10.0, 5.0);  // the rest of this one: it had its trial
  for (int interval = 0; interval < 5; ++interval) {
    std::vector<Mode> picks = runInterval(10.0, 5.0);
    EXPECT_EQ(count(picks, kSingle), kTrial) << "interval " << interval;
    EXPECT_GT(count(picks, kStaged), 1000);
  }
  EXPECT_NEAR(c.rate(kSingle), 5.0, 0.01);
}

TEST_F(Chooser, UntimedDeliveriesLeaveTheSingleCopyInPlace) {
  // One large message per call: every delivery is the first after an idle link.
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(c.pick(now), kSingle);
    now += 10 * kMs;
    c.delivered(kSingle, 1, kMsg, 0, now);
  }
  EXPECT_EQ(c.rate(kSingle), 0.0);
  EXPECT_EQ(c.rate(kStaged), 0.0);
}

TEST_F(Chooser, GoesSingleCopyWhenTheStagedCopyFallsBelowTheLastTrial) {
  runInterval(10.0, 5.0);
  runInterval(10.0, 5.0);
  runTrial(10.0, 5.0);  // this interval's, so that what follows is between trials
  ASSERT_EQ(c.current(), kStaged);
  ASSERT_NEAR(c.rate(kSingle), 5.0, 0.01);
  // One very slow delivery (a late receiver) does not flip it; a few slow ones do.
  deliver(kStaged, 1, 0.5);
  EXPECT_EQ(c.current(), kStaged);
  int taken = 0;
  while (c.current() == kStaged && taken < 50) {
    const Mode m = c.pick(now);
    deliver(m, 1, m == kStaged ? 2.0 : 5.0);
    taken += m == kStaged;
  }
  EXPECT_EQ(c.current(), kSingle);
  EXPECT_LE(taken, 6);
  // The staged copy is tried again soon (an eighth of the interval), in case that was a
  // passing dip; it is still slow, so the rest of the interval goes single-copy.
  std::vector<Mode> picks = runInterval(2.0, 5.0);
  EXPECT_EQ(count(picks, kStaged), kTrial);
  EXPECT_EQ(c.current(), kSingle);
  // The next interval tries the staged copy again, which is still slow.
  picks = runInterval(2.0, 5.0);
  EXPECT_EQ(count(picks, kStaged), kTrial);
  EXPECT_EQ(c.current(), kSingle);
  // Once it is fast again, the next trial wins it back.
  runInterval(10.0, 5.0);
  EXPECT_EQ(c.current(), kStaged);
  picks = runInterval(10.0, 5.0);
  EXPECT_EQ(count(picks, kSingle), kTrial);
}

TEST_F(Chooser, APassingDipCostsAnEighthOfTheInterval) {
  runInterval(10.0, 5.0);
  runInterval(10.0, 5.0);
  runTrial(10.0, 5.0);
  // A dip: the staged copy slows below the single copy's figure for a few messages.
  const uint64_t start = now;
  while (c.current() == kStaged) {
    const Mode m = c.pick(now);
    deliver(m, 1, m == kStaged ? 1.0 : 5.0);
  }
  // It is over at once; the early trial finds the staged copy fast again.
  while (c.current() == kSingle && now - start < 100 * kMs) {
    const Mode m = c.pick(now);
    deliver(m, 1, m == kStaged ? 10.0 : 5.0);
  }
  EXPECT_EQ(c.current(), kStaged);
  EXPECT_LE(now - start, 100 * kMs / 8 + 2 * kMs);
  // A slightly slower stretch (within 10% of the other's figure) between trials changes
  // nothing.
  runInterval(10.0, 9.5);
  runTrial(10.0, 9.5);
  for (int i = 0; i < 100; ++i) {
    const Mode m = c.pick(now);
    deliver(m, 1, m == kStaged ? 9.0 : 9.5);
  }
  EXPECT_EQ(c.current(), kStaged);
}

TEST_F(Chooser, TheFirstDeliveryAfterASwitchIsNotCounted) {
  ASSERT_EQ(c.pick(now), kSingle);
  deliver(kSingle, 1, 5.0);
  for (int i = 0; i < kTrial; ++i) ASSERT_EQ(c.pick(now), kStaged);
  // The trial's first delivery follows a single-copy one: however fast it looks (its
  // time was partly spent before the previous delivery was seen), it is not a sample.
  deliver(kStaged, 1, 1000.0);
  for (int i = 1; i < kTrial; ++i) {
    EXPECT_EQ(c.current(), kSingle) << "decided before the trial ended, at delivery " << i;
    deliver(kStaged, 1, 4.0);
  }
  // The same goes for the first single-copy delivery after the trial's.
  deliver(kSingle, 1, 0.001);
  for (int i = 1; i < kTrial; ++i) deliver(kSingle, 1, 5.0);
  EXPECT_EQ(c.current(), kSingle);
  EXPECT_NEAR(c.rate(kStaged), 4.0, 0.01);
}

TEST_F(Chooser, ATrialIsJudgedByTheMessagesRightAfterIt) {
  runInterval(10.0, 5.0);
  runInterval(10.0, 5.0);
  ASSERT_EQ(c.current(), kStaged);
  ASSERT_NEAR(c.rate(kStaged), 10.0, 0.01);
  // Both sides of a switch run slow: the single-copy trial at 6, below the staged
  // copy's steady 10, and the staged messages right after it at 5. The trial wins.
  runTrial(5.0, 6.0);
  EXPECT_EQ(c.current(), kSingle);
  EXPECT_NEAR(c.rate(kSingle), 6.0, 0.01);
  // A staged trial at 5 against single-copy messages at 7 after it: no change.
  runInterval(5.0, 7.0);
  runTrial(5.0, 7.0);
  EXPECT_EQ(c.current(), kSingle);
}

TEST_F(Chooser, WithoutTimedMessagesAfterItATrialIsJudgedByTheSteadyFigure) {
  runInterval(10.0, 5.0);
  runInterval(10.0, 5.0);
  ASSERT_EQ(c.current(), kStaged);
  for (int i = 0; i < kTrial; ++i) ASSERT_EQ(c.pick(now), kSingle);
  for (int i = 0; i < kTrial; ++i) deliver(kSingle, 1, 8.0);
  // The link went idle: the staged messages after the trial could not be timed.
  for (int i = 0; i < kTrial; ++i) c.delivered(kStaged, 1, kMsg, 0, now);
  EXPECT_EQ(c.current(), kStaged) << "8 is below the staged copy's 10";
}

TEST_F(Chooser, ARateIsARatioOfSumsNotAnAverageOfRates) {
  runInterval(6.0, 3.0);
  ASSERT_EQ(c.current(), kStaged);
  // Deliveries are seen when the sender polls: one message's time can come out nearly
  // zero because the one before it was seen late and took its time. Together they are
  // right, and so must be the estimate.
  for (int i = 0; i < 10; ++i) {
    c.pick(now);
    deliver(kStaged, 1, 6.0 * kMsg / (2.0 * kMsg - 1000.0 * 6.0));  // long
    c.pick(now);
    deliver(kStaged, 1, kMsg / 1000.0);  // 1000 ns: absurdly fast
  }
  EXPECT_NEAR(c.rate(kStaged), 6.0, 1.2);  // an average of the rates: ~260
}

TEST_F(Chooser, UntimedTrialCountsAsSlow) {
  runInterval(10.0, 5.0);
  runInterval(2.0, 5.0);
  ASSERT_EQ(c.current(), kSingle);
  now = (now / (100 * kMs) + 1) * 100 * kMs;
  for (int i = 0; i < kTrial; ++i) ASSERT_EQ(c.pick(now), kStaged);
  // The caller stopped polling before they were delivered: no time for any of them.
  c.delivered(kStaged, kTrial, 0, 0, now);
  for (int i = 0; i < kTrial; ++i) deliver(kSingle, 1, 5.0);
  EXPECT_EQ(c.current(), kSingle);
  EXPECT_EQ(c.rate(kStaged), 0.0);
  EXPECT_EQ(c.pick(now + 1), kSingle);
}

TEST(ChooserProbe, ZeroIntervalRunsTrialsBackToBack) {
  // Tests of the link use this to mix the two kinds of records in one stream.
  CopyModeChooser c(0);
  uint64_t now = 1;
  ASSERT_EQ(c.pick(now), kSingle);
  c.delivered(kSingle, 1, kMsg, 100'000, ++now);
  int staged = 0, single = 0;
  for (int round = 0; round < 5; ++round) {
    // A trial of the staged way, then as many single-copy messages, delivered in order.
    for (int i = 0; i < 2 * kTrial; ++i) (c.pick(++now) == kStaged ? staged : single)++;
    c.delivered(kStaged, kTrial, kTrial * kMsg, 1000, ++now);
    c.delivered(kSingle, kTrial, kTrial * kMsg, 1000, ++now);
  }
  EXPECT_EQ(single, 5 * kTrial);
  EXPECT_EQ(staged, 5 * kTrial);
}

// The chooser of a link between processes: staged, single-copy and streamed.
struct Chooser3 : ::testing::Test {
  CopyModeChooser c{100 * kMs, /*withStream=*/true};
  uint64_t now = 1000 * kMs + 1;
  double rates[CopyModeChooser::kModes] = {10.0, 5.0, 8.0};  // staged, single, streamed

  void deliver(Mode m, int n = 1) {
    const uint64_t ns = static_cast<uint64_t>(static_cast<double>(n * kMsg) / rates[m]);
    now += ns;
    c.delivered(m, n, n * kMsg, ns, now);
  }
  // Picks and delivers a trial that is due and the messages after it that decide it.
  void runTrial() {
    for (int i = 0; i < 2 * kTrial; ++i) deliver(c.pick(now));
  }
  // Picks and delivers one message at a time until the next interval; counts per mode.
  std::vector<int> runInterval() {
    std::vector<int> counts(CopyModeChooser::kModes, 0);
    const uint64_t end = (now / (100 * kMs) + 1) * 100 * kMs;
    while (now < end) {
      const Mode m = c.pick(now);
      ++counts[m];
      deliver(m);
    }
    return counts;
  }
};

TEST_F(Chooser3, ANewLinkTriesEveryModeAtOnceThenKeepsTheFastest) {
  rates[kStream] = 20.0;
  ASSERT_EQ(c.pick(now), kSingle);
  deliver(kSingle);
  for (int i = 0; i < kTrial; ++i) ASSERT_EQ(c.pick(now), kStaged) << i;
  for (int i = 0; i < kTrial; ++i) deliver(kStaged);
  for (int i = 0; i < kTrial; ++i) deliver(c.pick(now));  // single copy after the trial
  ASSERT_EQ(c.current(), kStaged);
  // No wait for the next interval: the streamed way's trial follows at once.
  for (int i = 0; i < kTrial; ++i) ASSERT_EQ(c.pick(now), kStream) << i;
  for (int i = 0; i < kTrial; ++i) deliver(kStream);
  for (int i = 0; i < kTrial; ++i) ASSERT_EQ(c.pick(now), kStaged) << i;
  for (int i = 0; i < kTrial; ++i) deliver(kStaged);
  EXPECT_EQ(c.current(), kStream);
  EXPECT_NEAR(c.rate(kStream), 20.0, 0.01);
  EXPECT_NEAR(c.rate(kStaged), 10.0, 0.01);
  EXPECT_NEAR(c.rate(kSingle), 5.0, 0.01);
  // Then only on interval boundaries.
  EXPECT_EQ(c.pick(now), kStream);
}

TEST_F(Chooser3, TrialsTakeTurnsBetweenTheModesNotInUse) {
  runInterval();
  runInterval();
  ASSERT_EQ(c.current(), kStaged);
  std::vector<Mode> tried;
  for (int interval = 0; interval < 6; ++interval) {
    std::vector<int> counts = runInterval();
    EXPECT_EQ(counts[kSingle] + counts[kStream], kTrial) << "interval " << interval;
    tried.push_back(counts[kSingle] ? kSingle : kStream);
    EXPECT_EQ(c.current(), kStaged);
  }
  for (size_t i = 1; i < tried.size(); ++i) EXPECT_NE(tried[i], tried[i - 1]) << "interval " << i;
}

TEST_F(Chooser3, ASpellGoesToTheFastestOtherModeAndBack) {
  rates[kStream] = 5.5;
  runInterval();
  runInterval();
  runInterval();
  runTrial();  // this interval's, so that what follows is between trials
  ASSERT_EQ(c.current(), kStaged);
  // Cross-core transfers slow down: the staged copy falls to 2, the streamed way keeps
  // 5.5, the kernel copy 5. The staged estimate passes below both figures at the same
  // delivery, and the faster of the two takes over.
  rates[kStaged] = 2.0;
  for (int i = 0; i < 20 && c.current() == kStaged; ++i) deliver(c.pick(now));
  EXPECT_EQ(c.current(), kStream);
  runInterval();
  runInterval();
  EXPECT_EQ(c.current(), kStream);
  // The spell ends: a later trial of the staged copy wins it back.
  rates[kStaged] = 10.0;
  for (int interval = 0; interval < 3 && c.current() != kStaged; ++interval) runInterval();
  EXPECT_EQ(c.current(), kStaged);
}

TEST(ChooserWithoutSingle, WhereTheKernelRefusesChoosesBetweenTheStagedWays) {
  CopyModeChooser c(100 * kMs, /*withStream=*/true, /*withSingle=*/false);
  uint64_t now = 1000 * kMs + 1;
  ASSERT_EQ(c.pick(now), kStaged) << "no single copy to start with";
  now += 100'000;
  c.delivered(kStaged, 1, kMsg, 100'000, now);
  for (int i = 0; i < kTrial; ++i) ASSERT_EQ(c.pick(now), kStream) << i;
  for (int i = 0; i < kTrial; ++i) {  // (the first, after a staged one, is not counted)
    now += 50'000;
    c.delivered(kStream, 1, kMsg, 50'000, now);
  }
  for (int i = 0; i < kTrial; ++i) {  // the staged messages after the trial
    ASSERT_EQ(c.pick(now), kStaged);
    now += 100'000;
    c.delivered(kStaged, 1, kMsg, 100'000, now);
  }
  EXPECT_EQ(c.current(), kStream);
  // Every later interval tries the staged way, never the single copy.
  int single = 0, staged = 0;
  for (int i = 0; i < 100'000; ++i) {
    const Mode m = c.pick(now);
    single += m == kSingle;
    staged += m == kStaged;
    now += 10'000;
    c.delivered(m, 1, kMsg, m == kStaged ? 100'000 : 50'000, now);
  }
  EXPECT_EQ(single, 0);
  EXPECT_EQ(staged, 10 * kTrial);  // 1 s: ten interval boundaries passed
  EXPECT_EQ(c.current(), kStream);
}

TEST(ChooserWithoutSingle, OneModeLeftMeansNoTrials) {
  CopyModeChooser c(0, /*withStream=*/false, /*withSingle=*/false);
  uint64_t now = 1;
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(c.pick(++now), kStaged);
    c.delivered(kStaged, 1, kMsg, 1000, ++now);
  }
}

}  // namespace
}  // namespace coll::shm
