// The autotuner's search (scripted scores in, parameters out) and how its parameters
// travel in the control vector.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine/autotune.hpp"
#include "engine/control.hpp"

namespace coll::engine {
namespace {

constexpr size_t M = 1 << 20;

// A score with one peak: 16M threshold, 2 ms cycle, 4M chunk (each knob separately).
double peakScore(const TunedParams& p) {
  return 1000 - 10 * std::fabs(std::log2(double(p.fusionThreshold) / (16 * M))) -
         5 * std::fabs(p.cycleMs - 2) - 3 * std::fabs(std::log2(double(p.fusionChunk) / (4 * M)));
}

// Drives the tuner with score(current()) until it is done; returns the parameters it tried
// in the scored samples.
std::vector<TunedParams> runToEnd(Autotuner& t, double (*score)(const TunedParams&)) {
  std::vector<TunedParams> tried;
  for (int i = 0; i < 1000 && !t.done(); ++i) {
    TunedParams p = t.current();
    if (t.record(score(p))) tried.push_back(p);
  }
  return tried;
}

TEST(Autotuner, WarmupIsNotScoredAndKeepsTheStart) {
  TunedParams start;  // the defaults: 128M, 1 ms, 16M
  AutotuneSettings s;
  s.warmupSamples = 2;
  Autotuner t(start, s);
  EXPECT_EQ(t.current(), start);
  EXPECT_FALSE(t.record(1e12));  // a huge warm-up score must not count
  EXPECT_EQ(t.current(), start);
  EXPECT_FALSE(t.record(1e12));
  EXPECT_EQ(t.scoredSamples(), 0);
  // Then the first knob's first candidate, the others at their start.
  EXPECT_EQ(t.current().fusionThreshold, 1 * M);
  EXPECT_EQ(t.current().cycleMs, 1.0);
  EXPECT_EQ(t.current().fusionChunk, 16 * M);
}

TEST(Autotuner, CoordinateDescentFindsThePeakAndStops) {
  AutotuneSettings s;
  s.warmupSamples = 0;
  Autotuner t(TunedParams{}, s);
  auto tried = runToEnd(t, peakScore);
  ASSERT_TRUE(t.done());
  size_t pass = knobCandidates(Knob::FusionThreshold).size() + knobCandidates(Knob::CycleTime).size() +
                knobCandidates(Knob::FusionChunk).size();
  EXPECT_EQ(tried.size(), pass);
  EXPECT_EQ(t.scoredSamples(), static_cast<int>(pass));
  TunedParams want{16 * M, 2.0, 4 * M};
  EXPECT_EQ(t.best(), want);
  EXPECT_EQ(t.current(), want);
  // The cycle candidates were tried with the threshold already at its best, the chunk
  // candidates with both.
  size_t nThr = knobCandidates(Knob::FusionThreshold).size();
  EXPECT_EQ(tried[nThr].fusionThreshold, 16 * M);
  EXPECT_EQ(tried[nThr].cycleMs, 0.25);
  EXPECT_EQ(tried.back(), (TunedParams{16 * M, 2.0, 64 * M}));
  // Done means done: no more samples, no more changes.
  EXPECT_FALSE(t.record(1e12));
  EXPECT_EQ(t.current(), want);
}

TEST(Autotuner, HoldsUserSetKnobsFixed) {
  AutotuneSettings s;
  s.warmupSamples = 1;
  s.fixed[static_cast<int>(Knob::FusionThreshold)] = true;
  s.fixed[static_cast<int>(Knob::FusionChunk)] = true;
  TunedParams start{100 * M, 1.0, 3 * M};  // the user's values, not candidates
  Autotuner t(start, s);
  auto tried = runToEnd(t, peakScore);
  EXPECT_EQ(tried.size(), knobCandidates(Knob::CycleTime).size());
  for (const auto& p : tried) {
    EXPECT_EQ(p.fusionThreshold, 100 * M);
    EXPECT_EQ(p.fusionChunk, 3 * M);
  }
  EXPECT_EQ(t.current(), (TunedParams{100 * M, 2.0, 3 * M}));

  // Every knob fixed: nothing to tune, done before any sample.
  for (bool& f : s.fixed) f = true;
  Autotuner none(start, s);
  EXPECT_TRUE(none.done());
  EXPECT_EQ(none.current(), start);
  EXPECT_FALSE(none.onRound(1000, 1.0).has_value());
}

// The bound: after maxSamples scored samples the best one so far wins, mid-knob too.
TEST(Autotuner, StopsAfterMaxSamplesWithTheBestSoFar) {
  AutotuneSettings s;
  s.warmupSamples = 0;
  s.maxSamples = 4;
  Autotuner t(TunedParams{}, s);
  const double scores[] = {5, 9, 7, 8, 100, 100};
  int i = 0;
  while (!t.done()) t.record(scores[i++]);
  EXPECT_EQ(i, 4);
  EXPECT_EQ(t.scoredSamples(), 4);
  EXPECT_EQ(t.current(), (TunedParams{4 * M, 1.0, 16 * M}));  // the second threshold, 9
}

// Equal scores keep the earlier candidate; a broken (NaN, negative) score never wins.
TEST(Autotuner, TiesKeepTheEarlierAndNaNNeverWins) {
  AutotuneSettings s;
  s.warmupSamples = 0;
  s.fixed[static_cast<int>(Knob::CycleTime)] = true;
  s.fixed[static_cast<int>(Knob::FusionChunk)] = true;
  Autotuner t(TunedParams{}, s);
  const double scores[] = {NAN, 3, 3, -1, 2, 3};
  for (double x : scores) t.record(x);
  ASSERT_TRUE(t.done());
  EXPECT_EQ(t.current().fusionThreshold, 4 * M);
}

// Samples from rounds: rounds without work do not count, the window starts where the
// previous one ended, and the score is bytes per second.
TEST(Autotuner, SamplesAreWindowsOfRoundsWithWork) {
  AutotuneSettings s;
  s.warmupSamples = 1;
  s.roundsPerSample = 2;
  Autotuner t(TunedParams{}, s);
  EXPECT_FALSE(t.onRound(0, 10.0));    // opens the first window at t = 10
  EXPECT_FALSE(t.onRound(500, 11.0));  // 1 of 2
  EXPECT_FALSE(t.onRound(0, 12.0));    // idle: does not count
  auto w = t.onRound(1500, 14.0);      // 2 of 2: 2000 bytes in 4 s
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->warmup);
  EXPECT_EQ(w->index, 0);
  EXPECT_EQ(w->bytes, 2000u);
  EXPECT_DOUBLE_EQ(w->seconds, 4.0);
  EXPECT_DOUBLE_EQ(w->score, 500.0);
  EXPECT_EQ(t.scoredSamples(), 0);
  EXPECT_EQ(t.current().fusionThreshold, 1 * M);  // warm-up over: the first candidate
  EXPECT_FALSE(t.onRound(100, 15.0));
  w = t.onRound(100, 16.0);  // 200 bytes in 2 s, from 14 s
  ASSERT_TRUE(w.has_value());
  EXPECT_FALSE(w->warmup);
  EXPECT_EQ(w->params.fusionThreshold, 1 * M);
  EXPECT_DOUBLE_EQ(w->score, 100.0);
  EXPECT_EQ(t.scoredSamples(), 1);
  EXPECT_EQ(t.current().fusionThreshold, 4 * M);
}

TEST(Autotuner, CsvLineMatchesTheHeader) {
  AutotuneSample smp;
  smp.index = 3;
  smp.params = {64 * M, 0.5, 4 * M};
  smp.bytes = 123456;
  smp.seconds = 0.5;
  smp.score = 246912;
  std::string header = autotuneCsvHeader(), line = autotuneCsvLine(smp);
  EXPECT_EQ(std::count(header.begin(), header.end(), ','), std::count(line.begin(), line.end(), ','));
  EXPECT_EQ(line, "3,tune,67108864,0.5,4194304,123456,0.500000,246912");
  EXPECT_EQ(describeTuned(smp.params), "fusion threshold 64M, cycle time 0.5 ms, fusion chunk 4M");
}

std::vector<uint8_t> minOf(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  std::vector<uint8_t> m(a.size());
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::min(a[i], b[i]);
  return m;
}

// Rank 0's parameters reach every rank unchanged through the min all-reduce, whatever the
// other ranks' slots say, and without them nothing is applied.
TEST(Control, CarriesTheCoordinatorsParameters) {
  LocalControl r0, r1, r2;
  r0.slots = r1.slots = r2.slots = {kSlotPending, kSlotIdle};
  r0.held = r1.held = r2.held = {true, false};
  r0.tune = TuneControl{{(64 * M) + 3, 0.25, (4 * M) + 1}, false};
  auto d = decodeControl(minOf(minOf(encodeControl(r1), encodeControl(r0)), encodeControl(r2)));
  ASSERT_TRUE(d.tune.has_value());
  EXPECT_EQ(d.tune->params, (TunedParams{(64 * M) + 3, 0.25, (4 * M) + 1}));
  EXPECT_FALSE(d.tune->done);
  EXPECT_EQ(d.ready, (std::vector<uint32_t>{0}));
  r0.tune->done = true;
  r0.tune->params.fusionThreshold = ~size_t{0} - 1;  // bytes of 0xFF must survive too
  d = decodeControl(minOf(encodeControl(r0), encodeControl(r1)));
  ASSERT_TRUE(d.tune.has_value());
  EXPECT_TRUE(d.tune->done);
  EXPECT_EQ(d.tune->params.fusionThreshold, ~size_t{0} - 1);
  EXPECT_FALSE(decodeControl(minOf(encodeControl(r1), encodeControl(r2))).tune.has_value());
}

}  // namespace
}  // namespace coll::engine
