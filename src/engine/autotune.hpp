// Online tuning of the engine's knobs (COLL_AUTOTUNE=1), as Horovod's HOROVOD_AUTOTUNE.
//
// Only the coordinator (rank 0 of the engine) runs an Autotuner. It measures the bytes
// the engine processes per second over a window of rounds with work (a sample), tries
// the candidates of one knob after another with the other knobs at their best so far
// (coordinate descent), and after a bounded number of samples settles on the parameters
// of the best-scoring sample. The parameters travel to the other ranks in the round's
// control all-reduce, so every rank switches in the same round.
//
// Pure logic: no clocks, no communication (the caller passes bytes and times), so that
// the same scores always give the same choices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coll::engine {

// The knobs: every rank must use the same values (the fused buffers and their chunks
// must match), so they are agreed on each round when tuning.
struct TunedParams {
  size_t fusionThreshold = 128u << 20;  // bytes (COLL_FUSION_THRESHOLD)
  double cycleMs = 1.0;                 // milliseconds (COLL_CYCLE_TIME)
  size_t fusionChunk = 16u << 20;       // bytes (COLL_FUSION_CHUNK)
  bool operator==(const TunedParams&) const = default;
};

enum class Knob : int { FusionThreshold = 0, CycleTime = 1, FusionChunk = 2, kCount = 3 };
const char* knobName(Knob k);

struct AutotuneSettings {
  int warmupSamples = 3;    // first samples, at the starting values, not scored
  int roundsPerSample = 10; // rounds with work in one sample
  int maxSamples = 15;      // scored samples at most (one pass over the candidates is 15)
  // Knobs the user set: held at their starting value, not tuned.
  bool fixed[static_cast<int>(Knob::kCount)] = {false, false, false};
};

// The values tried for each knob, in order.
const std::vector<double>& knobCandidates(Knob k);

struct AutotuneSample {
  int index = 0;        // 0-based, warm-up samples included
  bool warmup = false;  // not scored
  TunedParams params;
  uint64_t bytes = 0;
  double seconds = 0;
  double score = 0;     // bytes per second
};

class Autotuner {
 public:
  Autotuner(const TunedParams& start, const AutotuneSettings& s);

  // Parameters for the rounds from now on (the best ones once done()).
  const TunedParams& current() const { return current_; }
  bool done() const { return done_; }
  const TunedParams& best() const { return best_; }
  int scoredSamples() const { return scored_; }

  // After each round: the bytes it processed (0: no work) and the time (seconds) at its
  // end. Returns the sample this round finished, if any; current() may then change.
  std::optional<AutotuneSample> onRound(uint64_t bytes, double now);

  // Scores the sample at current() and moves on (onRound calls it; tests drive it
  // directly). Returns whether the sample was scored (false: warm-up or done).
  bool record(double score);

 private:
  void advance();
  TunedParams with(Knob k, size_t candidate) const;

  AutotuneSettings s_;
  TunedParams current_;
  TunedParams best_;
  TunedParams base_;      // the best values of the knobs tuned so far
  TunedParams knobBest_;  // the best sample of the knob being tuned
  double bestScore_ = -1;
  double knobBestScore_ = -1;
  int knob_ = -1;            // knob being tuned (-1: warm-up)
  size_t candidate_ = 0;     // index into knobCandidates(knob_)
  int warmupLeft_;
  int scored_ = 0;
  int samples_ = 0;
  bool done_ = false;
  // The open window.
  bool windowOpen_ = false;
  double windowStart_ = 0;
  uint64_t windowBytes_ = 0;
  int windowRounds_ = 0;
};

// The log (COLL_AUTOTUNE_LOG): a header, then one line per sample.
std::string autotuneCsvHeader();
std::string autotuneCsvLine(const AutotuneSample& s);
// "fusion threshold 64M, cycle time 1 ms, fusion chunk 16M": for log lines.
std::string describeTuned(const TunedParams& p);

}  // namespace coll::engine
