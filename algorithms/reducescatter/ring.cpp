// Ring reduce-scatter: the first half of ring all-reduce, with the ring rotated by one
// so that the block a rank finishes with is its own. Partial blocks live in scratch.
#include <cstring>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "algorithms/ring_stream.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

class RingReduceScatter final : public Algorithm {
 public:
  const char* name() const override { return "ring"; }
  const char* description() const override { return "pipelined ring, partial sums in scratch"; }
  OpKind kind() const override { return OpKind::ReduceScatter; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? 0 : ringStepsEstimate(c, c.figures<RingHops>().ring, static_cast<double>(bytes), true);
  }

  void run(Team& comm, const OpArgs& a) const override {
    const size_t es = typeSize(a.dtype);
    const int n = comm.nranks(), r = comm.rank();
    if (n == 1) {
      if (a.sendbuf != a.recvbuf) memcpy(a.recvbuf, a.sendbuf, a.count * es);
      return;
    }
    RingStream rs;
    rs.blocks = Blocks::equal(a.count);
    rs.order = comm.ringOrder();  // neighbours by topology; block p is rank order[p]'s
    rs.blocksFollowRanks = true;
    rs.base = modRank(comm.ringPosition() - 1, n);  // ends with block r after n-1 steps
    rs.steps = n - 1;
    rs.reduceSteps = n - 1;
    rs.dt = a.dtype;
    rs.op = a.op;
    rs.local = static_cast<const char*>(a.sendbuf);
    rs.firstSrc = rs.local + rs.blocks.off(rs.order ? rs.order[rs.base] : rs.base) * es;
    rs.dstBase = static_cast<char*>(comm.scratch(static_cast<size_t>(n) * a.count * es, 1));
    rs.redirectBlock = r;
    rs.redirectPtr = static_cast<char*>(a.recvbuf);
    rs.finishAverage = a.op == collAvg;
    Progress pg(comm, "reduce-scatter (ring)");
    runRingStream(comm, pg, rs);
  }
};

}  // namespace

const Algorithm& ringReduceScatter() {
  static const RingReduceScatter algo;
  return algo;
}

}  // namespace coll
