// Small blocking building blocks over a subset of ranks, for the leader-based paths of
// the hierarchical algorithms (latency-bound sizes). Every wait goes through Progress.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/exec.hpp"
#include "algorithms/patterns/layout.hpp"
#include "algorithms/ring_task.hpp"
#include "core/op.hpp"
#include "collective.h"

namespace coll {

// Recursive-doubling all-reduce of `count` elements in `buf` among `members` (this rank
// is members[pos]). Members beyond the largest power of two fold into a partner first.
// Both partners of a round combine in the same operand order (lower position first), so
// every member ends with the same bits. tmp holds count elements. No averaging.
void groupRdAllReduce(Progress& pg, const std::vector<int>& members, int pos, void* buf, void* tmp,
                      size_t count, collDataType_t dt, collRedOp_t op);

// Waits for a set of transfers through pg.
void waitXfers(Progress& pg, std::vector<Xfer>& xs);

// Where this rank sits in the hierarchical layout of its communicator (the cost model's,
// built once): its host's row, its column across hosts, and its index in each.
struct HierPlace {
  const patterns::HierLayout* lay = nullptr;
  int host = 0, local = 0;  // this rank's row (host) and column (local index)
  int H = 1, L = 1;         // hosts, ranks per host (uniform layouts)
  const std::vector<int>& row() const { return lay->grid[host]; }
};
HierPlace hierPlace(const Comm& comm);

// The column-ordered scratch of the hierarchical all-gather and reduce-scatter: n blocks
// of one rank's share (blk bytes), the block of grid[h][i] at (i * H + h) * blk, so that
// column i (local index i on every host) is contiguous. They need hosts of equal size.
struct HierGrid {
  HierPlace place;
  size_t blk = 0, column = 0;  // bytes of one block, of one column (H blocks)
  char* data = nullptr;
  char* columnOf(int i) const { return data + static_cast<size_t>(i) * column; }
};
bool hierGridUsable(const Comm& comm);
HierGrid hierGrid(Comm& comm, const OpArgs& a, int scratchSlot);

// Copies n blocks of `bytes` between rank order and the hierarchical grid's column-major
// order (block of grid[h][i] at position i * H + h): toGrid moves rank-ordered src into
// grid-ordered dst, otherwise the reverse.
void permuteGridBlocks(const patterns::HierLayout& lay, const char* src, char* dst, size_t bytes, bool toGrid);

// Runs one ring task to completion through pg.
void runRingTask(Comm& comm, Progress& pg, RingTaskSpec spec);

}  // namespace coll
