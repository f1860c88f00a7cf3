// Ring all-gather: at each step a rank forwards the block it received last, chunk by
// chunk, straight into the output buffer (no staging copies). Step 0 sends the rank's
// own block from the send buffer, copying it into the output as it goes.
#include <cstring>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "algorithms/ring_stream.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

class RingAllGather final : public Algorithm {
 public:
  const char* name() const override { return "ring"; }
  const char* description() const override { return "pipelined ring, received into place"; }
  OpKind kind() const override { return OpKind::AllGather; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? 0 : ringStepsEstimate(c, c.figures<RingHops>().ring, static_cast<double>(bytes), false);
  }

  void run(Team& comm, const OpArgs& a) const override {
    const size_t es = typeSize(a.dtype);
    const int n = comm.nranks(), r = comm.rank();
    char* own = static_cast<char*>(a.recvbuf) + static_cast<size_t>(r) * a.count * es;
    const bool outOfPlace = a.sendbuf != own;
    if (n == 1) {
      if (outOfPlace) memcpy(own, a.sendbuf, a.count * es);
      return;
    }
    RingStream rs;
    rs.blocks = Blocks::equal(a.count);
    rs.order = comm.ringOrder();  // neighbours by topology; block p is rank order[p]'s
    rs.blocksFollowRanks = true;
    rs.base = comm.ringPosition();
    rs.steps = n - 1;
    rs.reduceSteps = 0;
    rs.dt = a.dtype;
    // Out of place, the own block goes to the successor straight from sendbuf and into
    // own along the way (RingStream::firstMirror).
    rs.firstSrc = outOfPlace ? static_cast<const char*>(a.sendbuf) : own;
    rs.firstMirror = outOfPlace ? own : nullptr;
    rs.dstBase = static_cast<char*>(a.recvbuf);
    Progress pg(comm, "all-gather (ring)");
    runRingStream(comm, pg, rs);
  }
};

}  // namespace

const Algorithm& ringAllGather() {
  static const RingAllGather algo;
  return algo;
}

}  // namespace coll
