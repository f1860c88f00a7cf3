// Reduce-scatter by recursive halving: log2(p) exchanges, the first of half the data,
// instead of the ring's p - 1 steps. Any number of ranks: the odd rank of each of the
// first n - p2 pairs (rank order) folds its whole input into its even neighbour, which
// then owns both ranks' blocks and hands the odd rank its block at the end.
//
// Masks run from p2/2 down to 1 over virtual ranks, so the blocks a virtual rank keeps
// stay contiguous and end up being its own ranks' blocks. Each block is reduced by
// exactly one rank per step, so the result does not depend on timing.
#include <bit>
#include <limits>
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "algorithms/exec.hpp"
#include "algorithms/group_ops.hpp"
#include "algorithms/patterns/hd.hpp"
#include "algorithms/team.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

// Its halving steps over rank order (masks p2/2 ... 1), and the fold.
struct RankHalvingHops {
  explicit RankHalvingHops(const CostContext& c) {
    std::vector<int> masks;
    for (int m = static_cast<int>(std::bit_floor(static_cast<unsigned>(c.nranks()))) / 2; m >= 1; m >>= 1) masks.push_back(m);
    steps = halvingHops(c, patterns::identityLayout(c.nranks()).order, masks, &fold, &folds);
  }
  std::vector<Hop> steps;
  Hop fold;
  bool folds = false;
};

class HdReduceScatter final : public Algorithm {
 public:
  const char* name() const override { return "hd"; }
  const char* description() const override { return "recursive halving (any n: neighbours fold first)"; }
  OpKind kind() const override { return OpKind::ReduceScatter; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    if (c.nranks() <= 1) return std::numeric_limits<double>::infinity();
    const RankHalvingHops& h = c.figures<RankHalvingHops>();
    const double blk = static_cast<double>(bytes), total = c.nranks() * blk, o = c.params().msgUs;
    double t = h.folds ? h.fold.time(total) + o + c.reduceUs(total) + h.fold.time(blk) + o : 0;
    double b = total;
    for (const Hop& step : h.steps) {
      b /= 2;
      t += step.time(b) + o + c.reduceUs(b);
    }
    return t;
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks(), r = comm.rank();
    const size_t es = typeSize(a.dtype), blk = a.count * es, total = blk * n;
    if (n == 1) {
      if (a.sendbuf != a.recvbuf) memcpy(a.recvbuf, a.sendbuf, blk);
      return;
    }
    const patterns::HdRole role = patterns::hdRole(n, r);
    Progress pg(comm, "reduce-scatter (hd)");
    std::vector<Xfer> xs(2);
    auto exchange = [&](int peer, const void* from, size_t sbytes, void* into, size_t rbytes) {
      xs.assign(2, Xfer{});
      if (rbytes) pg.recv(peer, into, rbytes, &xs[0]);
      else xs[0].complete = true;
      if (sbytes) pg.send(peer, from, sbytes, &xs[1]);
      else xs[1].complete = true;
      waitXfers(pg, xs);
    };
    if (role.vrank < 0) {
      exchange(role.foldPeer, a.sendbuf, total, a.recvbuf, blk);
      return;
    }
    char* work = static_cast<char*>(comm.scratch(total, 3));
    char* tmp = static_cast<char*>(comm.scratch(total, 4));
    const char* src = static_cast<const char*>(a.sendbuf);
    if (role.foldPeer >= 0) {
      exchange(role.foldPeer, nullptr, 0, tmp, total);
      reduceBuffers(work, src, tmp, a.count * n, a.dtype, a.op);
      src = work;
    }
    // Byte offset of virtual rank v's first block (v == p2: the end).
    auto start = [&](int v) { return static_cast<size_t>(v < role.rem ? 2 * v : v + role.rem) * blk; };
    int lo = 0, hi = role.p2;
    for (int m = role.p2 / 2; m >= 1; m /= 2) {
      const int mid = lo + (hi - lo) / 2, pv = role.vrank ^ m;
      const bool upper = (role.vrank & m) != 0;
      const int keepLo = upper ? mid : lo, keepHi = upper ? hi : mid;
      const int giveLo = upper ? lo : mid, giveHi = upper ? mid : hi;
      const size_t keepAt = start(keepLo), keepBytes = start(keepHi) - keepAt;
      const size_t giveAt = start(giveLo), giveBytes = start(giveHi) - giveAt;
      exchange(patterns::hdPosOfVrank(n, pv), src + giveAt, giveBytes, tmp, keepBytes);
      const size_t cnt = keepBytes / es;
      if (role.vrank < pv) reduceBuffers(work + keepAt, src + keepAt, tmp, cnt, a.dtype, a.op);
      else reduceBuffers(work + keepAt, tmp, src + keepAt, cnt, a.dtype, a.op);
      src = work;
      lo = keepLo;
      hi = keepHi;
    }
    const size_t mineAt = start(role.vrank), mineBytes = start(role.vrank + 1) - mineAt;
    if (a.op == collAvg) finishAverage(work + mineAt, mineBytes / es, a.dtype, n);
    memcpy(a.recvbuf, work + static_cast<size_t>(r) * blk, blk);
    if (role.foldPeer >= 0) exchange(role.foldPeer, work + static_cast<size_t>(role.foldPeer) * blk, blk, nullptr, 0);
  }
};

}  // namespace

const Algorithm& hdReduceScatter() {
  static const HdReduceScatter algo;
  return algo;
}

}  // namespace coll
