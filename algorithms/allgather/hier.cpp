// Hierarchical all-gather for jobs that span hosts with the same number of ranks each.
// Ring all-gather sends every one of the n-1 other blocks over each inter-host edge; this
// sends each host's blocks to every other host once: first a ring per local index across
// hosts (local rank i collects column i: the blocks of local rank i on every host, so
// every rank and link carries inter-host traffic at once), then a ring inside each host
// that hands every local rank the other columns. Across H hosts of L ranks a host link
// carries (H-1) x L blocks each way instead of n-1 (2 of 3 with 2 x 2 ranks). The
// columns are not contiguous in rank order, so the result goes through a column-ordered
// scratch; the blocks are cut into segments, and while one segment is copied out and
// gathered inside the hosts, the next one crosses between them.
#include <cstring>

#include "algorithms/algorithm.hpp"
#include "algorithms/group_ops.hpp"
#include "algorithms/team.hpp"

namespace coll {
namespace {

// Comm::scratch slot of the column-ordered copy of the output (HierGrid).
constexpr int kGridSlot = 3;

class HierAllGather final : public HierGridAlgorithm {
 public:
  const char* description() const override {
    return "a ring per local rank across hosts, then a ring of columns inside each host";
  }
  OpKind kind() const override { return OpKind::AllGather; }

  void run(Team& comm, const OpArgs& a) const override {
    const HierGrid g = hierGrid(comm, a, kGridSlot);
    const HierPlace& p = g.place;
    TwoPhasePipeline pipe;
    pipe.segments = g.segments;
    pipe.beforeFirst = [&](int s) {
      memcpy(g.columnOf(s, p.local) + p.host * g.segBytes(s), static_cast<const char*>(a.sendbuf) + g.segOffset(s),
             g.segBytes(s));
    };
    pipe.first = [&](int s, int) {
      RingTaskSpec across = g.acrossHosts(s, a.dtype);
      across.base = p.host;
      across.steps = p.H - 1;
      across.firstSrc = across.dst + p.host * g.segBytes(s);
      return across;
    };
    pipe.second = [&](int s, int) {
      RingTaskSpec inside = g.insideHost(s, a.dtype);
      inside.base = p.local;
      inside.steps = p.L - 1;
      inside.firstSrc = g.columnOf(s, p.local);
      return inside;
    };
    pipe.afterSecond = [&](int s) {
      permuteGridBlocks(*p.lay, g.region(s), static_cast<char*>(a.recvbuf), a.count * g.es, g.segOffset(s),
                        g.segBytes(s), false);
    };
    Progress pg(comm, "all-gather (hier)");
    runTwoPhasePipeline(comm, pg, pipe);
  }
};

}  // namespace

const Algorithm& hierAllGather() {
  static const HierAllGather algo;
  return algo;
}

}  // namespace coll
