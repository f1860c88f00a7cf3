#include "engine/autotune.hpp"

#include <cstdio>
#include <sstream>

namespace coll::engine {
namespace {

constexpr double kMiB = 1 << 20;
constexpr int kKnobs = static_cast<int>(Knob::kCount);

std::string sizeText(size_t bytes) {
  std::ostringstream os;
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) os << (bytes >> 20) << "M";
  else if (bytes >= 1024 && bytes % 1024 == 0) os << (bytes >> 10) << "K";
  else os << bytes;
  return os.str();
}

}  // namespace

const char* knobName(Knob k) {
  switch (k) {
    case Knob::FusionThreshold: return "fusion threshold";
    case Knob::CycleTime: return "cycle time";
    case Knob::FusionChunk: return "fusion chunk";
    default: return "?";
  }
}

// A few values per knob around the defaults, spaced by factors of 2 to 4: a sample is a
// noisy measurement, so finer steps would mostly measure the noise.
const std::vector<double>& knobCandidates(Knob k) {
  static const std::vector<double> threshold = {1 * kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB, 128 * kMiB, 256 * kMiB};
  static const std::vector<double> cycle = {0.25, 0.5, 1, 2, 5};
  static const std::vector<double> chunk = {1 * kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB};
  switch (k) {
    case Knob::FusionThreshold: return threshold;
    case Knob::CycleTime: return cycle;
    default: return chunk;
  }
}

Autotuner::Autotuner(const TunedParams& start, const AutotuneSettings& s)
    : s_(s), current_(start), best_(start), base_(start), knobBest_(start), warmupLeft_(s.warmupSamples) {
  bool anyFree = false;
  for (bool f : s_.fixed) anyFree = anyFree || !f;
  if (!anyFree || s_.maxSamples <= 0) done_ = true;  // nothing to tune: no samples at all
  else if (warmupLeft_ <= 0) advance();
}

TunedParams Autotuner::with(Knob k, size_t candidate) const {
  TunedParams p = base_;
  double v = knobCandidates(k)[candidate];
  switch (k) {
    case Knob::FusionThreshold: p.fusionThreshold = static_cast<size_t>(v); break;
    case Knob::CycleTime: p.cycleMs = v; break;
    default: p.fusionChunk = static_cast<size_t>(v); break;
  }
  return p;
}

// Moves to the next candidate: the next value of this knob, else the first value of the
// next knob the user did not fix, else done (the best sample's parameters).
void Autotuner::advance() {
  if (knob_ >= 0 && ++candidate_ < knobCandidates(static_cast<Knob>(knob_)).size() &&
      scored_ < s_.maxSamples) {
    current_ = with(static_cast<Knob>(knob_), candidate_);
    return;
  }
  if (knob_ >= 0) base_ = knobBest_;
  do {
    ++knob_;
  } while (knob_ < kKnobs && s_.fixed[knob_]);
  if (knob_ >= kKnobs || scored_ >= s_.maxSamples) {
    done_ = true;
    current_ = best_;
    return;
  }
  candidate_ = 0;
  knobBestScore_ = -1;
  current_ = with(static_cast<Knob>(knob_), 0);
}

bool Autotuner::record(double score) {
  if (done_) return false;
  if (warmupLeft_ > 0) {
    if (--warmupLeft_ == 0) advance();
    return false;
  }
  if (!(score >= 0)) score = 0;  // also NaN: a broken measurement never wins
  ++scored_;
  // Strictly greater: on a tie the earlier sample stays, so equal scores keep the order of
  // the candidate lists (and the starting values, tried before anything else, win ties).
  if (score > bestScore_) {
    bestScore_ = score;
    best_ = current_;
  }
  if (score > knobBestScore_) {
    knobBestScore_ = score;
    knobBest_ = current_;
  }
  advance();
  return true;
}

std::optional<AutotuneSample> Autotuner::onRound(uint64_t bytes, double now) {
  if (done_) return std::nullopt;
  // A window opens at the end of the round that closed the previous one: the round after
  // it is the first to run with the new parameters.
  if (!windowOpen_) {
    windowOpen_ = true;
    windowStart_ = now;
    windowBytes_ = 0;
    windowRounds_ = 0;
    return std::nullopt;
  }
  if (bytes == 0) return std::nullopt;
  windowBytes_ += bytes;
  if (++windowRounds_ < s_.roundsPerSample) return std::nullopt;
  AutotuneSample smp;
  smp.index = samples_++;
  smp.warmup = warmupLeft_ > 0;
  smp.params = current_;
  smp.bytes = windowBytes_;
  smp.seconds = now - windowStart_;
  smp.score = smp.seconds > 0 ? static_cast<double>(windowBytes_) / smp.seconds : 0;
  record(smp.score);
  windowOpen_ = true;  // the next window starts here
  windowStart_ = now;
  windowBytes_ = 0;
  windowRounds_ = 0;
  return smp;
}

std::string autotuneCsvHeader() {
  return "sample,phase,fusion_threshold_bytes,cycle_time_ms,fusion_chunk_bytes,bytes,seconds,"
         "score_bytes_per_s";
}

std::string autotuneCsvLine(const AutotuneSample& s) {
  char buf[256];
  snprintf(buf, sizeof(buf), "%d,%s,%zu,%g,%zu,%llu,%.6f,%.0f", s.index, s.warmup ? "warmup" : "tune",
           s.params.fusionThreshold, s.params.cycleMs, s.params.fusionChunk,
           static_cast<unsigned long long>(s.bytes), s.seconds, s.score);
  return buf;
}

std::string describeTuned(const TunedParams& p) {
  std::ostringstream os;
  os << "fusion threshold " << sizeText(p.fusionThreshold) << ", cycle time " << p.cycleMs
     << " ms, fusion chunk " << sizeText(p.fusionChunk);
  return os.str();
}

}  // namespace coll::engine
