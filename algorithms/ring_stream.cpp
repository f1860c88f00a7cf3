#include "algorithms/ring_stream.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/config.hpp"
#include "base/error.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {

COLL_PARAM(kChunkBytes, "COLL_CHUNK_BYTES", "512K", "pipeline chunk of ring/chain algorithms");
COLL_PARAM(kDepth, "COLL_PIPELINE_DEPTH", "4", "chunks in flight per direction in pipelined algorithms");

// Out-of-range values are refused rather than moved into range: a user who asked for a
// depth of 1000 or 16-byte chunks would otherwise measure something they did not ask for.
size_t pipelineChunkBytes(const Config& cfg) {
  const size_t c = cfg.getSize(kChunkBytes);
  COLL_CHECK_ARG(c >= 64 && c <= (size_t{1} << 30), "COLL_CHUNK_BYTES must lie in [64, 1G] bytes (got '",
                 cfg.getStr(kChunkBytes), "')");
  return c;
}

int pipelineDepth(const Config& cfg) {
  const int64_t d = cfg.getInt(kDepth);
  COLL_CHECK_ARG(d >= 1 && d <= 64, "COLL_PIPELINE_DEPTH must lie in [1, 64] (got '", cfg.getStr(kDepth), "')");
  return static_cast<int>(d);
}

size_t pipelineChunkBytes(const Team& comm) { return comm.hot().chunkBytes; }
int pipelineDepth(const Team& comm) { return comm.hot().depth; }

namespace {

// Walks the (step, chunk) units of one direction of the stream in order.
struct Cursor {
  int t = 0;
  size_t k = 0;
};

class RingRunner {
 public:
  RingRunner(Team& comm, Progress& pg, const RingStream& rs)
      : comm_(comm), pg_(pg), rs_(rs), n_(comm.nranks()), r_(comm.rank()),
        es_(typeSize(rs.dt)) {
    int pos = r_;
    if (rs.order) pos = static_cast<int>(std::find(rs.order, rs.order + n_, r_) - rs.order);
    next_ = rs.order ? rs.order[(pos + 1) % n_] : (pos + 1) % n_;
    prev_ = rs.order ? rs.order[(pos + n_ - 1) % n_] : (pos + n_ - 1) % n_;
    chunkElems_ = std::max<size_t>(1, pipelineChunkBytes(comm) / es_);
    depth_ = static_cast<size_t>(pipelineDepth(comm));
    sendX_.resize(depth_);
    recvX_.resize(depth_);
    for (int t = 0; t < rs.steps; ++t) {
      totalSends_ += chunks(sendBlock(t));
      totalRecvs_ += chunks(recvBlock(t));
    }
    firstStepChunks_ = rs.steps > 0 ? chunks(sendBlock(0)) : 0;
    if (rs.firstMirror) {  // steps > 0 here (runRingStream)
      // Streaming stores into the mirror only where the output cannot stay in cache
      // anyway, as for reduction results (base/reduce.hpp): at 512 KiB, 2 ranks, they
      // made the all-gather take 25.5 against 18.7 us.
      mirrorCold_ = coldOutput(rs.blocks.off(n_) * es_);
      if (pg.linkCopiesMirror(next_)) mirror_ = rs.firstMirror;
      else memcpy(rs.firstMirror, rs.firstSrc, rs.blocks.cnt(sendBlock(0)) * es_);
    }
    // A link that reduces while it receives lands the reduce steps' chunks in place: no
    // staging slot, and the peer's bytes are read once instead of copied, then read again.
    // It pays once blocks span several chunks (2 ranks over shm, collMemAlloc buffers:
    // 8 MiB 1.5-2x, 64 MiB 1.2-1.3x faster); with one chunk per block it measured slower
    // (1 MiB in place: 110 against 50 us), so there the chunk is still staged.
    fused_ = rs.reduceSteps > 0 && rs.blocks.cnt(0) > chunkElems_ &&
             pg.linkReducesOnReceive(prev_, rs.local, rs.blocks.off(n_) * es_);
    if (rs.reduceSteps > 0 && !fused_)
      slots_ = static_cast<char*>(comm.scratch(depth_ * chunkElems_ * es_, 0));
  }

  void run() {
    while (sendsDone_ < totalSends_ || recvsDone_ < totalRecvs_) {
      bool acted = postRecvs();
      acted |= postSends();
      acted |= pg_.poll();
      acted |= finishRecvs();
      acted |= finishSends();
      if (acted) pg_.progressed();
      else pg_.idle();
    }
  }

 private:
  int blockAt(int p) const { return rs_.order && rs_.blocksFollowRanks ? rs_.order[p] : p; }
  int sendBlock(int t) const { return blockAt(modRank(static_cast<long>(rs_.base) - t, n_)); }
  int recvBlock(int t) const { return blockAt(modRank(static_cast<long>(rs_.base) - t - 1, n_)); }
  size_t chunks(int block) const { return (rs_.blocks.cnt(block) + chunkElems_ - 1) / chunkElems_; }
  size_t chunkLen(int block, size_t k) const {
    return std::min(chunkElems_, rs_.blocks.cnt(block) - k * chunkElems_);
  }
  // Advances a cursor past steps whose block is empty in that direction.
  void advance(Cursor& c, bool sendSide) const {
    ++c.k;
    while (c.t < rs_.steps && c.k >= chunks(sendSide ? sendBlock(c.t) : recvBlock(c.t))) {
      ++c.t;
      c.k = 0;
    }
  }
  void normalize(Cursor& c, bool sendSide) const {
    while (c.t < rs_.steps && c.k >= chunks(sendSide ? sendBlock(c.t) : recvBlock(c.t))) {
      ++c.t;
      c.k = 0;
    }
  }

  bool postRecvs() {
    bool acted = false;
    normalize(recvPostCur_, false);
    while (recvsPosted_ < totalRecvs_ && recvsPosted_ - recvsDone_ < depth_) {
      const Cursor& c = recvPostCur_;
      int b = recvBlock(c.t);
      size_t len = chunkLen(b, c.k);
      size_t slot = recvsPosted_ % depth_;
      char* out = rs_.dst(b, es_) + c.k * chunkElems_ * es_;
      if (c.t >= rs_.reduceSteps) {
        // The last step's blocks are not forwarded: final output, not read again here.
        pg_.recv(prev_, out, len * es_, &recvX_[slot], false, c.t == rs_.steps - 1);
      } else if (fused_) {
        const char* with = rs_.local + (rs_.blocks.off(b) + c.k * chunkElems_) * es_;
        pg_.recvReduce(prev_, out, with, len * es_, rs_.dt, rs_.op, &recvX_[slot]);
      } else {
        pg_.recv(prev_, slots_ + slot * chunkElems_ * es_, len * es_, &recvX_[slot]);
      }
      ++recvsPosted_;
      advance(recvPostCur_, false);
      acted = true;
    }
    return acted;
  }

  bool postSends() {
    bool acted = false;
    normalize(sendPostCur_, true);
    while (sendsPosted_ < totalSends_ && sendsPosted_ - sendsDone_ < depth_) {
      const Cursor& c = sendPostCur_;
      // Chunk k of step t carries what chunk k of step t-1 delivered: wait for it.
      if (c.t > 0 && recvsDone_ + firstStepChunks_ <= sendsPosted_) break;
      int b = sendBlock(c.t);
      size_t len = chunkLen(b, c.k);
      const size_t at = c.k * chunkElems_ * es_;
      const char* from = c.t == 0 ? rs_.firstSrc + at : rs_.dst(b, es_) + at;
      pg_.send(next_, from, len * es_, &sendX_[sendsPosted_ % depth_],
               c.t == 0 && mirror_ ? mirror_ + at : nullptr, mirrorCold_);
      ++sendsPosted_;
      advance(sendPostCur_, true);
      acted = true;
    }
    return acted;
  }

  // Receives are finished (reduced) strictly in order, so slot reuse stays simple even
  // when a transport completes them out of order.
  bool finishRecvs() {
    bool acted = false;
    normalize(recvDoneCur_, false);
    while (recvsDone_ < recvsPosted_ && recvX_[recvsDone_ % depth_].complete) {
      const Cursor& c = recvDoneCur_;
      if (c.t < rs_.reduceSteps) {
        int b = recvBlock(c.t);
        size_t len = chunkLen(b, c.k);
        size_t at = (rs_.blocks.off(b) + c.k * chunkElems_) * es_;
        char* out = rs_.dst(b, es_) + c.k * chunkElems_ * es_;
        if (!fused_) {
          const char* slot = slots_ + (recvsDone_ % depth_) * chunkElems_ * es_;
          reduceBuffers(out, rs_.local + at, slot, len, rs_.dt, rs_.op);
        }
        if (rs_.finishAverage && c.t == rs_.reduceSteps - 1) finishAverage(out, len, rs_.dt, n_);
      }
      ++recvsDone_;
      advance(recvDoneCur_, false);
      acted = true;
    }
    return acted;
  }

  bool finishSends() {
    bool acted = false;
    while (sendsDone_ < sendsPosted_ && sendX_[sendsDone_ % depth_].complete) {
      ++sendsDone_;
      acted = true;
    }
    return acted;
  }

  Team& comm_;
  Progress& pg_;
  const RingStream& rs_;
  int n_, r_;
  size_t es_;
  int next_ = 0, prev_ = 0;
  size_t chunkElems_ = 1;
  size_t depth_ = 1;
  char* slots_ = nullptr;
  bool fused_ = false;     // reduce steps receive through Progress::recvReduce
  char* mirror_ = nullptr;  // rs.firstMirror when step 0's link copies it
  bool mirrorCold_ = false;  // ... with streaming stores
  std::vector<Xfer> sendX_, recvX_;
  size_t totalSends_ = 0, totalRecvs_ = 0, firstStepChunks_ = 0;
  size_t sendsPosted_ = 0, sendsDone_ = 0, recvsPosted_ = 0, recvsDone_ = 0;
  Cursor sendPostCur_, recvPostCur_, recvDoneCur_;
};

}  // namespace

void runRingStream(Team& comm, Progress& pg, const RingStream& rs) {
  if (rs.steps <= 0) {
    if (rs.firstMirror) memcpy(rs.firstMirror, rs.firstSrc, rs.blocks.cnt(rs.base) * typeSize(rs.dt));
    return;
  }
  RingRunner(comm, pg, rs).run();
}

}  // namespace coll
