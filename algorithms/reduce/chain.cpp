// Pipelined chain reduce along the topology's ring order, from the rank after the root
// around to the root. Each rank adds its own contribution to every chunk passing through,
// so each link carries the buffer once; the ring order keeps a host's ranks together, so
// the chain crosses the network once per host whatever order the launcher gave the ranks.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "topology/layout.hpp"
#include "algorithms/ring_stream.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

class ChainReduce final : public Algorithm {
 public:
  const char* name() const override { return "chain"; }
  const char* description() const override { return "pipelined chain ending at the root"; }
  OpKind kind() const override { return OpKind::Reduce; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? 0 : chainEstimate(c, static_cast<double>(bytes), true);
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks();
    const size_t es = typeSize(a.dtype);
    const char* in = static_cast<const char*>(a.sendbuf);
    if (n == 1) {
      if (a.sendbuf != a.recvbuf) memcpy(a.recvbuf, a.sendbuf, a.count * es);
      return;
    }
    const patterns::RingLayout& ring = comm.layouts().ring;
    const int me = ring.pos[comm.rank()];
    const int pos = modRank(me - ring.pos[a.root] - 1, n);  // 0 starts the chain, n-1 is the root
    const bool first = pos == 0, isRoot = pos == n - 1;
    const size_t chunkElems = std::max<size_t>(1, pipelineChunkBytes(comm) / es);
    const size_t depth = static_cast<size_t>(pipelineDepth(comm));
    const size_t nchunks = (a.count + chunkElems - 1) / chunkElems;
    const int next = ring.next(me), prev = ring.prev(me);
    // As in the ring (ring_stream.cpp): a link that reduces while receiving lands each
    // chunk as its sum with our contribution, where the staged path would reduce it later.
    // Unlike the ring's, it pays with one chunk too (2 ranks, 8 KiB-512 KiB: 0.37-0.84x
    // the time), as our sends run beside it (sendToReduction): the predecessor copies
    // into the ring while we reduce out of it.
    Progress pg(comm, "reduce (chain)");
    const bool fused = !first && pg.linkReducesOnReceive(prev, in, a.count * es);
    // Middle ranks send from their slots; a fused root receives straight into recvbuf.
    const bool needSlots = !first && !(fused && isRoot);
    char* slots = needSlots ? static_cast<char*>(comm.scratch(depth * chunkElems * es, 0)) : nullptr;
    auto len = [&](size_t k) { return std::min(chunkElems, a.count - k * chunkElems); };
    auto slot = [&](size_t k) { return slots + (k % depth) * chunkElems * es; };
    std::vector<Xfer> sx(depth), rx(depth);
    const size_t sTotal = isRoot ? 0 : nchunks, rTotal = first ? 0 : nchunks;
    size_t sPosted = 0, sDone = 0, rPosted = 0, rDone = 0;
    while (sDone < sTotal || rDone < rTotal) {
      bool acted = false;
      // A middle rank reduces into the receive slot and sends from it, so a slot is
      // free again only when its send has completed.
      while (rPosted < rTotal && rPosted - rDone < depth && (isRoot || rPosted - sDone < depth)) {
        const size_t at = rPosted * chunkElems * es;
        char* out = isRoot ? static_cast<char*>(a.recvbuf) + at : slot(rPosted);
        if (fused) pg.recvReduce(prev, out, in + at, len(rPosted) * es, a.dtype, a.op, &rx[rPosted % depth]);
        else pg.recv(prev, slot(rPosted), len(rPosted) * es, &rx[rPosted % depth]);
        ++rPosted;
        acted = true;
      }
      while (sPosted < sTotal && sPosted - sDone < depth && (first || sPosted < rDone)) {
        const char* from = first ? in + sPosted * chunkElems * es : slot(sPosted);
        pg.sendToReduction(next, from, len(sPosted) * es, &sx[sPosted % depth]);
        ++sPosted;
        acted = true;
      }
      acted |= pg.poll();
      while (rDone < rPosted && rx[rDone % depth].complete) {
        size_t k = rDone, at = k * chunkElems * es;
        char* out = isRoot ? static_cast<char*>(a.recvbuf) + at : slot(k);
        if (!fused) reduceBuffers(out, in + at, slot(k), len(k), a.dtype, a.op);
        if (isRoot && a.op == collAvg) finishAverage(out, len(k), a.dtype, n);
        ++rDone;
        acted = true;
      }
      while (sDone < sPosted && sx[sDone % depth].complete) { ++sDone; acted = true; }
      if (acted) pg.progressed();
      else pg.idle();
    }
  }
};

}  // namespace

const Algorithm& chainReduce() {
  static const ChainReduce algo;
  return algo;
}

}  // namespace coll
