// Hierarchical all-gather for jobs that span hosts with the same number of ranks each.
// Ring all-gather sends every one of the n-1 other blocks over each inter-host edge; this
// sends each host's blocks to every other host once: first a ring per local index across
// hosts (local rank i collects column i: the blocks of local rank i on every host, so
// every rank and link carries inter-host traffic at once), then a ring inside each host
// that hands every local rank the other columns. Across H hosts of L ranks a host link
// carries (H-1) x L blocks each way instead of n-1 (2 of 3 with 2 x 2 ranks); the price
// is a copy of the whole output, since the columns are not contiguous in rank order.
#include <cstring>

#include "algorithms/algorithm.hpp"
#include "algorithms/group_ops.hpp"
#include "core/comm.hpp"

namespace coll {
namespace {

// Comm::scratch slot of the column-ordered copy of the output (HierGrid).
constexpr int kGridSlot = 3;

class HierAllGather final : public Algorithm {
 public:
  const char* name() const override { return "hier"; }
  const char* description() const override {
    return "a ring per local rank across hosts, then a ring of columns inside each host";
  }
  OpKind kind() const override { return OpKind::AllGather; }
  bool supports(const Comm& comm, const OpArgs&) const override { return hierGridUsable(comm); }

  void run(Comm& comm, const OpArgs& a) const override {
    const HierGrid g = hierGrid(comm, a, kGridSlot);
    const HierPlace& p = g.place;
    const size_t blk = g.blk;
    char* mine = g.columnOf(p.local);
    memcpy(mine + p.host * blk, a.sendbuf, blk);
    Progress pg(comm, "all-gather (hier)");
    RingTaskSpec across;
    across.members = p.lay->column(p.local);
    across.pos = p.host;
    across.base = p.host;
    across.steps = p.H - 1;
    across.blocks = Blocks::equal(a.count);
    across.dt = a.dtype;
    across.firstSrc = mine + p.host * blk;
    across.dst = mine;
    runRingTask(comm, pg, std::move(across));
    RingTaskSpec inside;
    inside.members = p.row();
    inside.pos = p.local;
    inside.base = p.local;
    inside.steps = p.L - 1;
    inside.blocks = Blocks::equal(a.count * p.H);
    inside.dt = a.dtype;
    inside.firstSrc = mine;
    inside.dst = g.data;
    runRingTask(comm, pg, std::move(inside));
    permuteGridBlocks(*p.lay, g.data, static_cast<char*>(a.recvbuf), blk, false);
  }
};

}  // namespace

const Algorithm& hierAllGather() {
  static const HierAllGather algo;
  return algo;
}

}  // namespace coll
