// Recursive halving-doubling all-reduce (Rabenseifner): a reduce-scatter by recursive
// halving, then an all-gather by recursive doubling. Each rank moves 2(p-1)/p of the
// buffer like the ring, but in 2 log2(p) steps instead of 2(p-1), so it wins at middle
// sizes. Any number of ranks: the odd member of each of the first n - p2 locality-order pairs
// folds its buffer into its neighbour first and gets the result back at the end.
//
// Steps run over locality-order positions with masks 1, 2, 4, ...: the first, largest
// exchange is between neighbours in that order (the same host, where it allows).
//
// Bit-identical results: after the halving every element has been reduced by exactly one
// rank; the doubling and the final fold only copy.
#include <bit>
#include <limits>
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "algorithms/exec.hpp"
#include "algorithms/group_ops.hpp"
#include "algorithms/patterns/hd.hpp"
#include "topology/layout.hpp"
#include "algorithms/ring_stream.hpp"
#include "algorithms/team.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

// Its halving steps over the locality order (masks 1, 2, ...), and the fold.
struct HalvingHops {
  explicit HalvingHops(const CostContext& c) {
    std::vector<int> masks;
    for (int m = 1; m < static_cast<int>(std::bit_floor(static_cast<unsigned>(c.nranks()))); m <<= 1) masks.push_back(m);
    steps = halvingHops(c, c.layouts().locality.order, masks, &fold, &folds);
  }
  std::vector<Hop> steps;
  Hop fold;
  bool folds = false;
};

class HdAllReduce final : public Algorithm {
 public:
  const char* name() const override { return "hd"; }
  const char* description() const override { return "recursive halving-doubling (Rabenseifner)"; }
  OpKind kind() const override { return OpKind::AllReduce; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    if (c.nranks() <= 1) return std::numeric_limits<double>::infinity();
    const HalvingHops& h = c.figures<HalvingHops>();
    const double s = static_cast<double>(bytes), o = c.params().msgUs;
    double t = h.folds ? 2 * (h.fold.time(s) + o) + c.reduceUs(s) : 0;
    double b = s;
    for (const Hop& step : h.steps) {
      b /= 2;
      // The halving step moves and reduces in pipeline chunks, the reduction of one
      // overlapping the transfer of the next; its doubling twin moves the bytes in one message.
      t += step.latUs + c.chunksOf(b) * o + c.params().overlap(step.wire(b), c.reduceUs(b)) + step.time(b) + o;
    }
    return t;
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks();
    const size_t es = typeSize(a.dtype), bytes = a.count * es;
    char* out = static_cast<char*>(a.recvbuf);
    const char* src = static_cast<const char*>(a.sendbuf);  // where this rank's partial sums are
    if (n == 1) {
      if (src != out) memcpy(out, src, bytes);
      return;
    }
    const patterns::RingLayout& lay = comm.layouts().locality;
    const int me = lay.pos[comm.rank()];
    const patterns::HdRole role = patterns::hdRole(n, me);
    char* tmp = static_cast<char*>(comm.scratch(bytes, 3));
    Progress pg(comm, "all-reduce (hd)");
    const size_t depth = static_cast<size_t>(std::max(1, pipelineDepth(comm)));
    const size_t chunkElems = std::max<size_t>(1, pipelineChunkBytes(comm) / es);
    std::vector<Xfer> xs(2);
    // Sends `sbytes` from `from` and receives `rbytes` into `into` with one peer at once;
    // empty directions are skipped on both sides alike.
    auto exchange = [&](int peerPos, const void* from, size_t sbytes, void* into, size_t rbytes) {
      xs.assign(2, Xfer{});
      int peer = lay.order[peerPos];
      if (rbytes) pg.recv(peer, into, rbytes, &xs[0]);
      else xs[0].complete = true;
      if (sbytes) pg.send(peer, from, sbytes, &xs[1]);
      else xs[1].complete = true;
      waitXfers(pg, xs);
    };
    // One halving step: give `giveCnt` elements to the peer (virtual rank pv), and reduce
    // the `keepCnt` it sends into mine, as out = mine (+) theirs. Both directions move in
    // pipeline chunks, and each chunk that arrives is reduced while later ones are still on
    // their way: it is still in cache from the copy that received it, where a whole half
    // of a few MiB is not (with a busy neighbour on the shared cache, halves of 1-2 MiB took
    // 10-30% longer in one piece). At most COLL_PIPELINE_DEPTH pieces are in flight: with
    // hundreds posted at once, 16-256 MiB across hosts ran 5-9% slower than in one piece.
    auto halve = [&](int peer, int pv, const char* give, size_t giveCnt, const char* mine, char* dst,
                     size_t keepCnt) {
      const size_t pieces = std::max({size_t(1), (keepCnt + chunkElems - 1) / chunkElems,
                                      (giveCnt + chunkElems - 1) / chunkElems});
      const Blocks keepAt = Blocks::split(keepCnt, static_cast<int>(pieces));
      const Blocks giveAt = Blocks::split(giveCnt, static_cast<int>(pieces));
      xs.assign(2 * pieces, Xfer{});
      auto post = [&](size_t c) {
        const int i = static_cast<int>(c);
        if (keepAt.cnt(i)) pg.recv(peer, tmp + keepAt.off(i) * es, keepAt.cnt(i) * es, &xs[2 * c]);
        else xs[2 * c].complete = true;
        if (giveAt.cnt(i)) pg.send(peer, give + giveAt.off(i) * es, giveAt.cnt(i) * es, &xs[2 * c + 1]);
        else xs[2 * c + 1].complete = true;
      };
      for (size_t c = 0; c < pieces && c < depth; ++c) post(c);
      for (size_t c = 0; c < pieces; ++c) {
        const int i = static_cast<int>(c);
        pg.waitUntil([&] { return xs[2 * c].complete; });
        if (c + depth < pieces) post(c + depth);
        const size_t off = keepAt.off(i) * es;
        // Lower virtual rank's operand first: the same order the partner would use.
        if (role.vrank < pv) reduceBuffers(dst + off, mine + off, tmp + off, keepAt.cnt(i), a.dtype, a.op);
        else reduceBuffers(dst + off, tmp + off, mine + off, keepAt.cnt(i), a.dtype, a.op);
      }
      waitXfers(pg, xs);
    };
    if (role.vrank < 0) {  // fold in, then wait for the whole result
      exchange(role.foldPeer, src, bytes, out, bytes);
      return;
    }
    if (role.foldPeer >= 0) {
      exchange(role.foldPeer, nullptr, 0, tmp, bytes);
      reduceBuffers(out, src, tmp, a.count, a.dtype, a.op);
      src = out;
    }
    const Blocks blocks = Blocks::split(a.count, role.p2);
    auto span = [&](patterns::BlockRange r) {
      size_t lo = blocks.off(r.lo), hi = r.hi < role.p2 ? blocks.off(r.hi) : a.count;
      return std::make_pair(lo, hi - lo);
    };
    const int steps = patterns::hdSteps(n);
    for (int s = 0; s < steps; ++s) {
      const int pv = role.vrank ^ (1 << s), peerPos = patterns::hdPosOfVrank(n, pv);
      auto [keepOff, keepCnt] = span(patterns::hdRangeAfter(role.p2, role.vrank, s + 1));
      auto [giveOff, giveCnt] = span(patterns::hdRangeAfter(role.p2, pv, s + 1));
      halve(lay.order[peerPos], pv, src + giveOff * es, giveCnt, src + keepOff * es, out + keepOff * es, keepCnt);
      src = out;
    }
    if (a.op == collAvg) {
      auto [off, cnt] = span(patterns::hdRangeAfter(role.p2, role.vrank, steps));
      finishAverage(out + off * es, cnt, a.dtype, n);
    }
    for (int s = steps - 1; s >= 0; --s) {
      const int pv = role.vrank ^ (1 << s), peerPos = patterns::hdPosOfVrank(n, pv);
      auto [mineOff, mineCnt] = span(patterns::hdRangeAfter(role.p2, role.vrank, s + 1));
      auto [theirOff, theirCnt] = span(patterns::hdRangeAfter(role.p2, pv, s + 1));
      exchange(peerPos, out + mineOff * es, mineCnt * es, out + theirOff * es, theirCnt * es);
    }
    if (role.foldPeer >= 0) exchange(role.foldPeer, out, bytes, nullptr, 0);
  }
};

}  // namespace

const Algorithm& hdAllReduce() {
  static const HdAllReduce algo;
  return algo;
}

}  // namespace coll
