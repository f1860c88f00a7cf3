// Runs the collectives the fusion plan calls for, on this rank's entries. Every rank runs
// the same groups in the same order; a rank without an entry for a response (it joined)
// contributes zeros.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/collectives.hpp"
#include "engine/compression/codec.hpp"
#include "engine/compression/residuals.hpp"
#include "engine/entry.hpp"
#include "engine/fusion_buffer.hpp"
#include "engine/fusion_policy.hpp"
#include "engine/timeline.hpp"

namespace coll::engine {

struct EngineCounters {
  std::atomic<uint64_t> cycles{0}, cacheHits{0}, negotiated{0}, collectives{0}, fusedTensors{0},
      stallWarnings{0}, directBytes{0};
  std::atomic<uint64_t> callerRounds{0};  // rounds run by waiting callers (Engine::driveOnce)
  // The values in effect (tuned ones when COLL_AUTOTUNE is on), the same on every rank.
  std::atomic<uint64_t> fusionThreshold{0}, cycleUs{0}, fusionChunk{0}, autotuneDone{0};
};

class Executor {
 public:
  Executor(Collectives& c, FusionBuffers& bufs, ResidualStore& residuals, Timeline* timeline,
           EngineCounters& counters, uint64_t seed, size_t compressionChunkElems,
           size_t fusionChunkBytes)
      : c_(c), bufs_(bufs), residuals_(residuals), timeline_(timeline), counters_(counters),
        rng_(seed), chunkElems_(compressionChunkElems), fusionChunkBytes_(fusionChunkBytes) {}

  struct Member {
    const Response* resp;
    Entry* entry;
  };
  // An uncompressed allreduce issued without waiting: back-to-back allreduces then flow
  // through the communicator without a round trip through this thread, and copies of one
  // group overlap the transfer of another.
  struct InFlight {
    std::vector<Member> members;
    std::vector<size_t> offsets;       // fused: element offset of each member
    bool fused = false;
    uint8_t* buf = nullptr;            // fused: the staging buffer
    void* recv = nullptr;              // direct: where the result lands
    std::vector<uint8_t> joinedRecv;   // direct on a joined rank: a private result buffer
    std::shared_ptr<const void> joinedSend;  // direct on a joined rank: the zeros it sends
    // Fused groups go out in pieces of chunkElems, each issued as soon as it is staged.
    std::vector<std::pair<size_t, size_t>> chunks;  // [lo, hi) element ranges
    std::vector<std::unique_ptr<PendingOp>> ops;    // one per chunk (direct: one)
    Clock::time_point t0, t1;
  };

  // Takes effect from the next fused allreduce; every rank must change it in the same round.
  void setFusionChunkBytes(size_t bytes) { fusionChunkBytes_ = bytes > 0 ? bytes : 1; }

  static bool isAsyncAllreduce(const Response& r) {
    return r.meta.op == OpType::Allreduce && r.meta.compression.kind == CompressKind::None;
  }
  // Stages and issues an uncompressed allreduce group; slot picks the staging buffer.
  std::unique_ptr<InFlight> startAllreduce(const std::vector<Response>& ready, const FusionGroup& g,
                                           const std::vector<Entry*>& local, BufferSlot slot);
  // Waits for it and copies results out (postscale).
  void finishAllreduce(InFlight& f);

  // Runs any group to completion. local[i] is this rank's entry for ready[g.members[i]]
  // (null: joined rank). Throws coll::Error; the caller fails the group's entries with it.
  void run(const std::vector<Response>& ready, const FusionGroup& g,
           const std::vector<Entry*>& local);

 private:
  void allreduceCompressed(const std::vector<Member>& m);
  void broadcastFused(const std::vector<Member>& m);
  void broadcastDirect(const Member& m);
  void allgather(const Member& m);
  void alltoall(const Member& m);
  void reducescatter(const Member& m);
  void* allocateOutput(Entry& e, std::vector<int64_t> shape);
  const DenseCodec* codecFor(const CompressionSpec& spec);
  // Copies [lo, hi) of a fused allreduce between the members and the staging buffer.
  void stageIn(InFlight& f, size_t lo, size_t hi);
  void stageOut(InFlight& f, size_t lo, size_t hi);
  void trace(const std::vector<Member>& m, const char* phase, Clock::time_point a, Clock::time_point b);
  void trace(const Member& m, const char* phase, Clock::time_point a, Clock::time_point b) {
    trace(std::vector<Member>{m}, phase, a, b);
  }

  Collectives& c_;
  FusionBuffers& bufs_;
  ResidualStore& residuals_;
  Timeline* timeline_;
  EngineCounters& counters_;
  Rng rng_;
  std::vector<uint32_t> topkScratch_;  // top-k candidate lists, kept across steps
  size_t chunkElems_;
  size_t fusionChunkBytes_;
  std::unique_ptr<DenseCodec> codec_;  // the last one used (groups repeat every step)
  CompressionSpec codecSpec_;
};

}  // namespace coll::engine
