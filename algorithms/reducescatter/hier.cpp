// Hierarchical reduce-scatter for jobs that span hosts with the same number of ranks
// each, the mirror image of the hierarchical all-gather: a ring inside each host leaves
// local rank i with column i (the blocks of local rank i on every host) summed over its
// host, then a ring per local index across hosts finishes each rank's own block. A host
// link carries (H-1) x L blocks each way instead of the flat ring's n-1; the price is a
// copy of the whole input into column order.
//
// Every element is summed in a fixed order (inside the host along its ring, then across
// hosts along the column's ring), so repeated calls give the same bits.
#include <cstring>

#include "algorithms/algorithm.hpp"
#include "algorithms/group_ops.hpp"
#include "core/comm.hpp"

namespace coll {
namespace {

// Comm::scratch slots: the column-ordered copy of the input (HierGrid), and the rings'
// staging of received chunks.
constexpr int kGridSlot = 3, kStageSlot = 4;

class HierReduceScatter final : public Algorithm {
 public:
  const char* name() const override { return "hier"; }
  const char* description() const override {
    return "a ring of columns inside each host, then a ring per local rank across hosts";
  }
  OpKind kind() const override { return OpKind::ReduceScatter; }
  bool supports(const Comm& comm, const OpArgs&) const override { return hierGridUsable(comm); }

  void run(Comm& comm, const OpArgs& a) const override {
    const HierGrid g = hierGrid(comm, a, kGridSlot);
    const HierPlace& p = g.place;
    const size_t blk = g.blk;
    char* grid = g.data;
    permuteGridBlocks(*p.lay, static_cast<const char*>(a.sendbuf), grid, blk, true);
    Progress pg(comm, "reduce-scatter (hier)");
    // Reduces in place: each block's own contribution is read once, when the partial sum
    // of that block arrives, and the sum takes its place.
    RingTaskSpec inside;
    inside.members = p.row();
    inside.pos = p.local;
    inside.base = modRank(p.local - 1, p.L);  // ends with column `local` after L-1 steps
    inside.steps = inside.reduceSteps = p.L - 1;
    inside.blocks = Blocks::equal(a.count * p.H);
    inside.dt = a.dtype;
    inside.op = a.op;
    inside.local = grid;
    inside.firstSrc = g.columnOf(inside.base);
    inside.dst = grid;
    inside.scratchSlot = kStageSlot;
    runRingTask(comm, pg, std::move(inside));
    char* mine = g.columnOf(p.local);
    RingTaskSpec across;
    across.members = p.lay->column(p.local);
    across.pos = p.host;
    across.base = modRank(p.host - 1, p.H);  // ends with this rank's own block
    across.steps = across.reduceSteps = p.H - 1;
    across.blocks = Blocks::equal(a.count);
    across.dt = a.dtype;
    across.op = a.op;
    across.local = mine;
    across.firstSrc = mine + across.base * blk;
    across.dst = mine;
    across.avgDivisor = a.op == collAvg ? comm.nranks() : 0;
    across.scratchSlot = kStageSlot;
    runRingTask(comm, pg, std::move(across));
    memcpy(a.recvbuf, mine + p.host * blk, blk);
  }
};

}  // namespace

const Algorithm& hierReduceScatter() {
  static const HierReduceScatter algo;
  return algo;
}

}  // namespace coll
