// Hierarchical reduce-scatter for jobs that span hosts with the same number of ranks
// each, the mirror image of the hierarchical all-gather: a ring inside each host leaves
// local rank i with column i (the blocks of local rank i on every host) summed over its
// host, then a ring per local index across hosts finishes each rank's own block. A host
// link carries (H-1) x L blocks each way instead of the flat ring's n-1. The input goes
// through a column-ordered scratch, segment by segment: while one segment crosses between
// hosts, the next one is copied in and reduced inside them.
//
// Every element is summed in a fixed order (inside the host along its ring, then across
// hosts along the column's ring), so repeated calls give the same bits.
#include <cstring>

#include "algorithms/algorithm.hpp"
#include "algorithms/group_ops.hpp"
#include "algorithms/team.hpp"

namespace coll {
namespace {

// Comm::scratch slots: the column-ordered copy of the input (HierGrid), and the staging
// of received chunks for the two tasks each phase may run at once.
constexpr int kGridSlot = 3, kInsideSlot = 4, kAcrossSlot = 6;

class HierReduceScatter final : public HierGridAlgorithm {
 public:
  const char* description() const override {
    return "a ring of columns inside each host, then a ring per local rank across hosts";
  }
  OpKind kind() const override { return OpKind::ReduceScatter; }

  void run(Team& comm, const OpArgs& a) const override {
    const HierGrid g = hierGrid(comm, a, kGridSlot);
    const HierPlace& p = g.place;
    TwoPhasePipeline pipe;
    pipe.segments = g.segments;
    pipe.beforeFirst = [&](int s) {
      permuteGridBlocks(*p.lay, static_cast<const char*>(a.sendbuf), g.region(s), a.count * g.es, g.segOffset(s),
                        g.segBytes(s), true);
    };
    // Both rings reduce in place: each block's own contribution is read once, when the
    // partial sum of that block arrives, and the sum takes its place.
    pipe.first = [&](int s, int parity) {
      RingTaskSpec inside = g.insideHost(s, a.dtype);
      inside.op = a.op;
      inside.base = modRank(p.local - 1, p.L);  // ends with column `local` after L-1 steps
      inside.steps = inside.reduceSteps = p.L - 1;
      inside.local = inside.dst;
      inside.firstSrc = g.columnOf(s, inside.base);
      inside.scratchSlot = kInsideSlot + parity;
      return inside;
    };
    pipe.second = [&](int s, int parity) {
      RingTaskSpec across = g.acrossHosts(s, a.dtype);
      across.op = a.op;
      across.base = modRank(p.host - 1, p.H);  // ends with this rank's own block
      across.steps = across.reduceSteps = p.H - 1;
      across.local = across.dst;
      across.firstSrc = across.local + across.base * g.segBytes(s);
      across.avgDivisor = a.op == collAvg ? comm.nranks() : 0;
      across.scratchSlot = kAcrossSlot + parity;
      return across;
    };
    pipe.afterSecond = [&](int s) {
      memcpy(static_cast<char*>(a.recvbuf) + g.segOffset(s), g.columnOf(s, p.local) + p.host * g.segBytes(s),
             g.segBytes(s));
    };
    Progress pg(comm, "reduce-scatter (hier)");
    runTwoPhasePipeline(comm, pg, pipe);
  }
};

}  // namespace

const Algorithm& hierReduceScatter() {
  static const HierReduceScatter algo;
  return algo;
}

}  // namespace coll
