// One process set's engine: a background thread that runs negotiation rounds every
// COLL_CYCLE_TIME ms. A round is one small min-allreduce of the control vector (cache
// hits, flags); only when some rank has requests the cache does not know does it also
// all-gather their descriptions and run the negotiation state machine. Ready tensors are
// then fused by the policy and executed, in the same order on every rank.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "collective/hvd.hpp"
#include "engine/autotune.hpp"
#include "engine/collectives.hpp"
#include "engine/control.hpp"
#include "engine/executor.hpp"
#include "engine/negotiation.hpp"
#include "engine/response_cache.hpp"
#include "engine/stall.hpp"
#include "engine/tensor_queue.hpp"

namespace coll {
class Config;
}

namespace coll::engine {

struct EngineParams {
  double cycleMs = 1.0;
  // After kIdleRounds rounds in which no rank had anything queued or in flight, rounds
  // come this often instead: an idle engine's round trips cost CPU that training
  // computation on the same cores needs (about 5% of a core per rank at 1 ms).
  double idleCycleMs = 10.0;
  FusionParams fusion;
  size_t cacheCapacity = 1024;
  StallParams stall;
  double shutdownTimeoutSeconds = 60;
  size_t compressionChunkBytes = 8u << 20;  // pipeline granularity of compressed allreduce
  size_t fusionChunkBytes = 16u << 20;      // pipeline granularity of a fused allreduce
  // COLL_AUTOTUNE: rank 0 of the global process set's engine tunes the fusion threshold,
  // cycle time and fusion chunk (autotune.hpp); the knobs the user set stay fixed.
  bool autotune = false;
  std::string autotuneLog;  // COLL_AUTOTUNE_LOG: CSV of the samples ("": none)
  AutotuneSettings autotuneSettings;
  // COLL_ENGINE_CALLER_ROUNDS: a caller that waits on its handle runs the rounds itself
  // while no other thread runs one (no hand-off to the engine's thread and back).
  bool callerRounds = true;
  static EngineParams fromConfig(const Config& cfg);
};

// Throws collInvalidArgument unless 0 <= seconds <= 1e9 (a timeout tunable named param).
void checkWaitSeconds(const char* param, double seconds);

class Engine {
 public:
  Engine(std::unique_ptr<Collectives> c, const EngineParams& p, Timeline* timeline,
         int processSetId);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Throws coll::Error (duplicate name in flight, engine stopped). Entries of one call
  // are accepted all together or not at all.
  void submit(EntryPtr e);
  void submitAll(std::vector<EntryPtr> entries);
  // Runs the next round now rather than at the next cycle tick (a caller is waiting).
  void nudge();
  // Runs one round in the calling thread, unless another thread is running one (or the
  // caller must not: the engine's own thread, a thread inside collGroupStart/End): a
  // caller that waits on its results drives the engine itself, without waking the
  // engine's thread and being woken by it in turn, two hand-offs that each wait for the
  // scheduler. Rounds still pair up one to one across ranks through the control
  // all-reduce, whichever thread runs them.
  enum class Drive { Ran, Busy, Stopped };
  Drive driveOnce();
  // Stops the engine on every member of the process set at its next round: operations
  // still pending there fail, and later submits are refused. Returns once this rank's
  // engine has stopped (or after shutdownTimeoutSeconds, stopping this rank alone).
  void shutdown();
  bool running() const { return !stopped_.load(); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  collective::hvd::Stats stats() const;
  std::vector<std::string> stallReports() const;

 private:
  struct Ready {
    Response resp;
    EntryPtr entry;  // null on a joined rank
  };
  void loop();
  // One round with its failure handling, under roundMu_; false once the engine stopped.
  bool runRound();
  bool cycle();
  void intake(double now);
  LocalControl buildControl(double now);
  void collectReady(const RoundDecision& d, double now, std::vector<Ready>& ready);
  std::vector<std::vector<RequestMeta>> exchangeRequests();
  void execute(std::vector<Ready>& ready);
  void runSpecial(Ready& r);
  void finishEntry(Ready& r);
  void inspectStalls(double now);
  // Autotuning (engine_tune.cpp).
  void startTuning();
  void applyTuned(const TuneControl& t);
  void tuneAfterRound(const std::vector<Ready>& ready);
  void complete(Entry& e, collResult_t code, const std::string& msg);
  void failAll(collResult_t code, const std::string& msg);
  double now() const;

  std::unique_ptr<Collectives> c_;
  EngineParams p_;
  Timeline* timeline_;
  int processSet_;
  int rank_;
  int size_;
  Clock::time_point start_;

  TensorQueue queue_;
  Negotiator negotiator_;
  ResponseCache cache_;
  StallInspector stall_;
  FusionBuffers buffers_;
  ResidualStore residuals_;
  EngineCounters counters_;
  FusionParams roundFusion_;  // p_.fusion with this round's automatic direct threshold
  Executor executor_;

  // Owned by the engine thread.
  std::unordered_map<uint32_t, EntryPtr> cachedPending_;  // cache slot -> entry
  std::vector<uint32_t> invalidate_;                      // slots to invalidate this round
  std::vector<EntryPtr> uncached_;                        // for the next full negotiation
  std::unordered_map<std::string, EntryPtr> negotiating_; // sent, waiting for a decision
  bool joined_ = false;
  std::string abortReason_;
  // Recent durations of the control all-reduce (microseconds): the latency of one small
  // collective, for the automatic direct threshold. The least of them discounts rounds
  // where this rank waited for a late peer.
  std::array<double, 32> controlUs_{};
  size_t controlRounds_ = 0;
  uint8_t proposedDirectLog2() const;
  static constexpr uint64_t kIdleRounds = 32;
  // Written in rounds, read by the engine's thread between them (rounds may run in a
  // caller's thread): atomic.
  std::atomic<uint64_t> idleRounds_{0};  // consecutive rounds in which no rank was busy
  std::atomic<double> cycleMs_{1.0};  // p_.cycleMs, or the tuned value
  // The coordinator's tuner (rank 0 of process set 0 with COLL_AUTOTUNE=1) and its log.
  std::unique_ptr<Autotuner> tuner_;
  struct CloseFile {
    void operator()(FILE* f) const { fclose(f); }
  };
  std::unique_ptr<FILE, CloseFile> tuneLog_;
  bool tuneSettled_ = false;

  std::atomic<bool> wantShutdown_{false};
  std::atomic<bool> forceStop_{false};
  bool nudged_ = false;  // guarded by mu_
  // A caller waits (synchronize) on work of this rank; cleared once none is unfinished.
  bool hurry_ = false;   // guarded by mu_
  // What handles call to nudge us; cleared when we are destroyed (handles may outlive us).
  struct NudgeTarget {
    std::mutex mu;
    Engine* engine = nullptr;
  };
  std::shared_ptr<NudgeTarget> nudgeTarget_ = std::make_shared<NudgeTarget>();
  void attachNudge(Entry& e);
  // Held for a whole round by whichever thread runs it (ours or a waiting caller's): the
  // engine's tables are touched only under it.
  std::mutex roundMu_;
  std::atomic<bool> dead_{false};  // a round ended the engine; the loop exits
  std::atomic<int> drivers_{0};    // callers inside driveOnce (the destructor waits them out)
  // When a caller last ran a round (steady clock ticks): the engine's thread keeps out of
  // the way for a cycle after it (loop).
  std::atomic<Clock::rep> lastDriven_{0};
  std::atomic<bool> stopped_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> stallReports_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace coll::engine
