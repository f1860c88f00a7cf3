// Engine lifecycle: parameters, the background thread, submission and shutdown.
// The round itself is in engine_round.cpp.
#include "engine/engine.hpp"

#include <algorithm>
#include <thread>

#include "base/config.hpp"
#include "base/error.hpp"
#include "comm/handles.hpp"
#include "base/log.hpp"

namespace coll::engine {

COLL_PARAM(kCycleTime, "COLL_CYCLE_TIME", "1", "engine: milliseconds between negotiation rounds");
COLL_PARAM(kIdleCycleTime, "COLL_IDLE_CYCLE_TIME", "10", "engine: milliseconds between rounds once no rank has had work for 32 rounds (the first request after a quiet spell may wait this long)");
COLL_PARAM(kFusionThreshold, "COLL_FUSION_THRESHOLD", "128M", "engine: most bytes fused into one collective");
COLL_PARAM(kFusionDirect, "COLL_FUSION_DIRECT_BYTES", "auto", "engine: uncompressed tensors this large run unfused, in place (0: fuse all; auto: from the measured latency of a collective)");
COLL_PARAM(kCacheCapacity, "COLL_CACHE_CAPACITY", "1024", "engine: response cache slots (0 disables the cache)");
COLL_PARAM(kStallCheck, "COLL_STALL_CHECK_SECONDS", "60", "engine: warn about tensors not submitted by every rank after this long (0: off)");
COLL_PARAM(kStallShutdown, "COLL_STALL_SHUTDOWN_SECONDS", "0", "engine: stop and fail pending work when a tensor stalls this long (0: never)");
COLL_PARAM(kCompressionChunk, "COLL_COMPRESSION_CHUNK", "8M", "engine: float32 bytes per pipelined chunk of a compressed allreduce");
COLL_PARAM(kFusionChunk, "COLL_FUSION_CHUNK", "16M", "engine: a fused allreduce goes out in pieces of this many bytes, staged while the previous piece is on the wire");
COLL_PARAM(kAutotune, "COLL_AUTOTUNE", "0", "engine: 1 lets rank 0 tune the fusion threshold, cycle time and fusion chunk while the job runs (the ones set in the environment stay fixed)");
COLL_PARAM(kAutotuneLog, "COLL_AUTOTUNE_LOG", "", "engine: CSV file where rank 0 writes each autotune sample (the parameters and the score)");
COLL_PARAM(kAutotuneWarmup, "COLL_AUTOTUNE_WARMUP_SAMPLES", "3", "engine: autotune samples at the starting values that are not scored");
COLL_PARAM(kAutotuneSteps, "COLL_AUTOTUNE_STEPS_PER_SAMPLE", "10", "engine: rounds with work in one autotune sample");
COLL_PARAM(kAutotuneMax, "COLL_AUTOTUNE_MAX_SAMPLES", "15", "engine: scored autotune samples at most, then the best one's parameters stay");
COLL_PARAM(kCallerRounds, "COLL_ENGINE_CALLER_ROUNDS", "1", "engine: 1 lets a caller that waits on its results (synchronize, a blocking call) run the engine's rounds in its own thread while no other thread runs one; 0 leaves every round to the engine's thread");
COLL_PARAM(kShutdownTimeout, "COLL_SHUTDOWN_TIMEOUT", "60", "engine: seconds shutdown waits for the round that stops the engine on every rank");

// A wait of this many seconds goes through std::chrono::wait_for, whose conversion to the
// clock's nanoseconds overflows far beyond 1e9 s and makes the wait return at once.
void checkWaitSeconds(const char* param, double seconds) {
  COLL_CHECK_ARG(seconds >= 0 && seconds <= 1e9, param, "=", seconds,
                 " must be between 0 and 1000000000 (seconds)");
}

EngineParams EngineParams::fromConfig(const Config& cfg) {
  EngineParams p;
  p.cycleMs = cfg.getDouble(kCycleTime);
  COLL_CHECK_ARG(p.cycleMs >= 0, kCycleTime, "=", p.cycleMs, " must not be negative");
  p.idleCycleMs = cfg.getDouble(kIdleCycleTime);
  COLL_CHECK_ARG(p.idleCycleMs >= 0 && p.idleCycleMs <= 1000, kIdleCycleTime, "=", p.idleCycleMs,
                 " must be between 0 and 1000 (milliseconds)");
  p.fusion.thresholdBytes = cfg.getSize(kFusionThreshold);
  p.fusion.directAuto = cfg.getStr(kFusionDirect) == "auto";
  p.fusion.directBytes = p.fusion.directAuto ? kDirectBytesFallback : cfg.getSize(kFusionDirect);
  p.cacheCapacity = static_cast<size_t>(cfg.getInt(kCacheCapacity));
  p.stall.warnSeconds = cfg.getDouble(kStallCheck);
  p.stall.shutdownSeconds = cfg.getDouble(kStallShutdown);
  p.shutdownTimeoutSeconds = cfg.getDouble(kShutdownTimeout);
  checkWaitSeconds(kShutdownTimeout, p.shutdownTimeoutSeconds);
  p.compressionChunkBytes = cfg.getSize(kCompressionChunk);
  p.fusionChunkBytes = cfg.getSize(kFusionChunk);
  int64_t on = cfg.getInt(kAutotune);
  COLL_CHECK_ARG(on == 0 || on == 1, kAutotune, "=", on, " must be 0 or 1");
  p.autotune = on == 1;
  p.autotuneLog = cfg.getStr(kAutotuneLog);
  AutotuneSettings& a = p.autotuneSettings;
  int64_t warmup = cfg.getInt(kAutotuneWarmup), steps = cfg.getInt(kAutotuneSteps), most = cfg.getInt(kAutotuneMax);
  COLL_CHECK_ARG(warmup >= 0 && warmup <= 1000000, kAutotuneWarmup, "=", warmup, " must be between 0 and 1000000");
  COLL_CHECK_ARG(steps >= 1 && steps <= 1000000, kAutotuneSteps, "=", steps, " must be between 1 and 1000000");
  COLL_CHECK_ARG(most >= 1 && most <= 1000000, kAutotuneMax, "=", most, " must be between 1 and 1000000");
  a.warmupSamples = static_cast<int>(warmup);
  a.roundsPerSample = static_cast<int>(steps);
  a.maxSamples = static_cast<int>(most);
  a.fixed[static_cast<int>(Knob::FusionThreshold)] = cfg.isSet(kFusionThreshold);
  a.fixed[static_cast<int>(Knob::CycleTime)] = cfg.isSet(kCycleTime);
  a.fixed[static_cast<int>(Knob::FusionChunk)] = cfg.isSet(kFusionChunk);
  int64_t caller = cfg.getInt(kCallerRounds);
  COLL_CHECK_ARG(caller == 0 || caller == 1, kCallerRounds, "=", caller, " must be 0 or 1");
  p.callerRounds = caller == 1;
  return p;
}

Engine::Engine(std::unique_ptr<Collectives> c, const EngineParams& p, Timeline* timeline,
               int processSetId)
    : c_(std::move(c)),
      p_(p),
      timeline_(timeline),
      processSet_(processSetId),
      rank_(c_->rank()),
      size_(c_->size()),
      start_(Clock::now()),
      queue_(rank_),
      negotiator_(size_),
      cache_(p.cacheCapacity, rank_),
      stall_(p.stall),
      roundFusion_(p.fusion),
      executor_(*c_, buffers_, residuals_, timeline, counters_,
                0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank_ + 1) + processSetId,
                std::max<size_t>(1, p.compressionChunkBytes / sizeof(float)),
                std::max<size_t>(1, p.fusionChunkBytes)) {
  stall_.setProcessSet(processSetId);
  counters_.directBytes = roundFusion_.directBytes;
  cycleMs_ = p_.cycleMs;
  startTuning();
  nudgeTarget_->engine = this;
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(nudgeTarget_->mu);
    nudgeTarget_->engine = nullptr;  // no caller starts driving from now on
  }
  try {
    shutdown();
  } catch (const std::exception& e) {
    COLL_WARN("engine of process set %d: shutdown failed: %s", processSet_, e.what());
  }
  // Callers already inside driveOnce see the engine stopped and leave.
  while (drivers_.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

double Engine::now() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void Engine::submit(EntryPtr e) {
  attachNudge(*e);
  queue_.push(std::move(e));  // refused with the reason once the engine has stopped
}

void Engine::nudge() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    nudged_ = true;
    hurry_ = true;
  }
  cv_.notify_all();
}

void Engine::attachNudge(Entry& e) {
  if (!e.handle || e.handle->nudge) return;
  e.handle->nudge = [t = nudgeTarget_] {
    std::lock_guard<std::mutex> lk(t->mu);
    if (t->engine) t->engine->nudge();
  };
  if (!p_.callerRounds) return;
  e.handle->drive = [t = nudgeTarget_] {
    Engine* eng;
    {
      std::lock_guard<std::mutex> lk(t->mu);
      eng = t->engine;
      if (!eng) return false;
      ++eng->drivers_;  // before t->mu is released: the destructor waits for it
    }
    const Drive d = eng->driveOnce();
    --eng->drivers_;  // eng may be gone from here on
    return d == Drive::Ran;
  };
}

Engine::Drive Engine::driveOnce() {
  if (dead_ || stopped_) return Drive::Stopped;
  // The engine's own thread already holds roundMu_ in a round; a thread inside a group
  // would add the round's collectives to its group.
  if (std::this_thread::get_id() == thread_.get_id() || groupActive()) return Drive::Busy;
  std::unique_lock<std::mutex> lk(roundMu_, std::try_to_lock);
  if (!lk.owns_lock()) return Drive::Busy;
  if (dead_) return Drive::Stopped;
  LogRankScope scope(rank_);
  ++counters_.callerRounds;
  const bool alive = runRound();
  lastDriven_ = Clock::now().time_since_epoch().count();
  if (!alive) {
    lk.unlock();
    nudge();  // the engine's thread leaves its loop now rather than at its next tick
    return Drive::Stopped;
  }
  return Drive::Ran;
}

bool Engine::runRound() {
  try {
    if (!cycle()) dead_ = true;
  } catch (const Error& e) {
    COLL_WARN("engine of process set %d stopped: %s", processSet_, e.what());
    failAll(e.code(), strCat("engine of process set ", processSet_, " stopped: ", e.what()));
    dead_ = true;
  } catch (const std::exception& e) {
    failAll(collInternalError, strCat("engine of process set ", processSet_, " stopped: ", e.what()));
    dead_ = true;
  }
  return !dead_;
}

void Engine::submitAll(std::vector<EntryPtr> entries) {
  for (auto& e : entries) attachNudge(*e);
  queue_.pushAll(std::move(entries));  // refused with the reason once the engine has stopped
}

void Engine::shutdown() {
  if (!thread_.joinable()) return;
  wantShutdown_ = true;
  {
    std::unique_lock<std::mutex> lk(mu_);
    auto limit = std::chrono::duration<double>(p_.shutdownTimeoutSeconds);
    if (!cv_.wait_for(lk, limit, [&] { return stopped_.load(); })) {
      COLL_WARN("engine of process set %d: no round with the other ranks completed within %.0f s "
                "(COLL_SHUTDOWN_TIMEOUT); stopping this rank alone",
                processSet_, p_.shutdownTimeoutSeconds);
      forceStop_ = true;
    }
  }
  thread_.join();
}

void Engine::loop() {
  LogRankScope scope(rank_);
  auto next = Clock::now();
  try {
    for (;;) {
      {
        std::lock_guard<std::mutex> round(roundMu_);
        if (dead_ || !runRound()) break;
      }
      // Read after the round: it may have switched to a tuned cycle time.
      const double cycleMs = cycleMs_;
      auto busyPeriod = std::chrono::duration<double, std::milli>(cycleMs);
      auto idlePeriod = std::chrono::duration<double, std::milli>(std::max(cycleMs, p_.idleCycleMs));
      // Every rank counts the same idle rounds (from the reduced decision), so all slow
      // down and speed up together.
      next += std::chrono::duration_cast<Clock::duration>(idleRounds_ >= kIdleRounds ? idlePeriod : busyPeriod);
      // A caller waits on this rank's work and some of it is still unfinished, waiting for
      // other ranks: go straight into the next round, whose control all-reduce waits for
      // them, instead of sleeping out the cycle. The work then runs as soon as the last
      // rank's engine joins (its own wait nudges it), not up to a cycle later.
      bool hurry;
      {
        std::lock_guard<std::mutex> lk(mu_);
        hurry = hurry_ && queue_.inFlight() > 0;
        if (!hurry) hurry_ = false;
        if (hurry) nudged_ = false;
      }
      auto t = Clock::now();
      if (hurry) {
        next = t;
      } else if (t < next) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait_until(lk, next, [&] { return forceStop_.load() || nudged_; });
        // Woken early: the rounds go on from now, not from the (maybe idle) tick.
        if (nudged_) next = Clock::now();
        nudged_ = false;
      } else {
        next = t;  // a long round: do not try to catch up with a burst of rounds
      }
      // Callers ran rounds lately (driveOnce): leave the rounds to them until they have
      // not for a cycle. A round of ours would hold roundMu_ waiting in the control
      // all-reduce until every other rank ran its next round, which would then pair with
      // ours, and a caller arriving meanwhile would wait behind it.
      if (!hurry) {
        for (;;) {
          const auto quietUntil = Clock::time_point(Clock::duration(lastDriven_.load())) +
                                  std::chrono::duration_cast<Clock::duration>(busyPeriod);
          std::unique_lock<std::mutex> lk(mu_);
          if (forceStop_ || dead_ || nudged_ || Clock::now() >= quietUntil) break;
          cv_.wait_until(lk, quietUntil, [&] { return forceStop_.load() || dead_.load() || nudged_; });
        }
        next = std::max(next, Clock::now());
      }
      if (forceStop_) {
        std::lock_guard<std::mutex> round(roundMu_);
        failAll(collInvalidUsage, strCat("engine of process set ", processSet_,
                                         " stopped before every rank shut down"));
        break;
      }
    }
  } catch (const std::exception& e) {
    // Only the waiting above can throw here (runRound handles the round's failures).
    std::lock_guard<std::mutex> round(roundMu_);
    failAll(collInternalError, strCat("engine of process set ", processSet_, " stopped: ", e.what()));
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

void Engine::complete(Entry& e, collResult_t code, const std::string& msg) {
  queue_.release(e.meta.name);
  e.handle->finish(code, msg);
}

void Engine::failAll(collResult_t code, const std::string& msg) {
  for (auto& e : queue_.close(code, msg)) complete(*e, code, msg);
  for (auto& [slot, e] : cachedPending_) complete(*e, code, msg);
  for (auto& e : uncached_) complete(*e, code, msg);
  for (auto& [name, e] : negotiating_) complete(*e, code, msg);
  cachedPending_.clear();
  uncached_.clear();
  negotiating_.clear();
}

collective::hvd::Stats Engine::stats() const {
  collective::hvd::Stats s;
  s.cycles = counters_.cycles;
  s.cache_hits = counters_.cacheHits;
  s.negotiated = counters_.negotiated;
  s.collectives = counters_.collectives;
  s.fused_tensors = counters_.fusedTensors;
  s.stall_warnings = counters_.stallWarnings;
  s.direct_bytes = counters_.directBytes;
  s.fusion_threshold = counters_.fusionThreshold;
  s.cycle_time_us = counters_.cycleUs;
  s.fusion_chunk = counters_.fusionChunk;
  s.autotune_done = counters_.autotuneDone != 0;
  s.caller_rounds = counters_.callerRounds;
  return s;
}

std::vector<std::string> Engine::stallReports() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stallReports_;
}

}  // namespace coll::engine
