// Autotuning in the engine (COLL_AUTOTUNE): the coordinator scores rounds and proposes
// parameters; every rank applies what the round's control all-reduce carries.
#include <cerrno>
#include <cstring>

#include "base/log.hpp"
#include "engine/engine.hpp"

namespace coll::engine {

void Engine::startTuning() {
  counters_.fusionThreshold = p_.fusion.thresholdBytes;
  counters_.cycleUs = static_cast<uint64_t>(p_.cycleMs * 1000 + 0.5);
  counters_.fusionChunk = p_.fusionChunkBytes;
  // One coordinator for the job: rank 0 of the global process set. Other process sets keep
  // the configured values (their traffic is part of what the global one measures anyway).
  if (!p_.autotune || rank_ != 0 || processSet_ != 0) return;
  TunedParams start{p_.fusion.thresholdBytes, p_.cycleMs, p_.fusionChunkBytes};
  tuner_ = std::make_unique<Autotuner>(start, p_.autotuneSettings);
  COLL_INFO("engine autotune: starting from %s (%d warm-up samples, %d rounds with work per "
            "sample, at most %d scored samples)",
            describeTuned(start).c_str(), p_.autotuneSettings.warmupSamples,
            p_.autotuneSettings.roundsPerSample, p_.autotuneSettings.maxSamples);
  if (p_.autotuneLog.empty()) return;
  tuneLog_.reset(fopen(p_.autotuneLog.c_str(), "w"));
  // Tuning goes on without its log: a training job should not fail over a log file.
  if (!tuneLog_) {
    COLL_WARN("engine autotune: cannot write COLL_AUTOTUNE_LOG=%s: %s; tuning without a log",
              p_.autotuneLog.c_str(), strerror(errno));
    return;
  }
  fprintf(tuneLog_.get(), "%s\n", autotuneCsvHeader().c_str());
  fflush(tuneLog_.get());
}

// Every rank, in the same round: the fused groups of this round are planned with the new
// threshold and cut into the new chunks on every rank alike.
void Engine::applyTuned(const TuneControl& t) {
  roundFusion_.thresholdBytes = t.params.fusionThreshold;
  cycleMs_ = t.params.cycleMs;
  executor_.setFusionChunkBytes(t.params.fusionChunk);
  counters_.fusionThreshold = t.params.fusionThreshold;
  counters_.cycleUs = static_cast<uint64_t>(t.params.cycleMs * 1000 + 0.5);
  counters_.fusionChunk = t.params.fusionChunk;
  if (t.done && !tuneSettled_) {
    tuneSettled_ = true;
    counters_.autotuneDone = 1;
    COLL_INFO("engine autotune: settled on %s", describeTuned(t.params).c_str());
  }
}

void Engine::tuneAfterRound(const std::vector<Ready>& ready) {
  if (!tuner_) return;
  uint64_t bytes = 0;
  for (const auto& r : ready)
    if (!r.resp.error) bytes += r.resp.meta.byteSize();
  auto s = tuner_->onRound(bytes, now());
  if (!s) return;
  if (tuneLog_) {
    fprintf(tuneLog_.get(), "%s\n", autotuneCsvLine(*s).c_str());
    fflush(tuneLog_.get());
  }
  if (tuner_->done())
    COLL_INFO("engine autotune: best of %d samples: %s", tuner_->scoredSamples(),
              describeTuned(tuner_->best()).c_str());
}

}  // namespace coll::engine
