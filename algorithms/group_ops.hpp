// Small blocking building blocks over a subset of ranks, for the leader-based paths of
// the hierarchical algorithms (latency-bound sizes). Every wait goes through Progress.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/exec.hpp"
#include "topology/layout.hpp"
#include "algorithms/ring_task.hpp"
#include "base/op.hpp"
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
HierPlace hierPlace(const Team& comm);

// The column-ordered scratch of the hierarchical all-gather and reduce-scatter. Every
// rank's block (count elements) is cut into segments (hierSegments of the whole buffer);
// segment s of all n blocks forms one region, in which the piece of grid[h][i] sits at
// (i * H + h) * segBytes(s), so that column i (local index i on every host) is
// contiguous. They need hosts of equal size.
struct HierGrid {
  HierPlace place;
  size_t es = 1;
  Blocks seg;        // the segments of one block, in elements
  int segments = 1;
  char* data = nullptr;
  size_t segBytes(int s) const { return seg.cnt(s) * es; }
  size_t segOffset(int s) const { return seg.off(s) * es; }
  char* region(int s) const { return data + static_cast<size_t>(place.H * place.L) * segOffset(s); }
  char* columnOf(int s, int i) const { return region(s) + static_cast<size_t>(i * place.H) * segBytes(s); }
  // Ring tasks over segment s, results in place: across hosts among this rank's column
  // (one block per host, this rank's column as dst), and inside the host among its row
  // (one column per local rank, the region as dst). The caller sets base, steps and
  // where the data comes from.
  RingTaskSpec acrossHosts(int s, collDataType_t dt) const;
  RingTaskSpec insideHost(int s, collDataType_t dt) const;
};
HierGrid hierGrid(Team& comm, const OpArgs& a, int scratchSlot);

// Base of the hierarchical all-gather and reduce-scatter: named "hier", and run only where
// the job spans hosts of equal size.
class HierGridAlgorithm : public Algorithm {
 public:
  const char* name() const override { return "hier"; }
  bool supports(const CostContext& c, const OpArgs&) const override;
  double estimate(const CostContext& c, size_t bytes) const override;
};

// Copies one piece of every rank's block between rank order and column order: rank r's
// block starts at rankBuf + r * stride, the piece at `offset` in it, `len` bytes; in
// gridBuf the piece of grid[h][i] is at (i * H + h) * len. toGrid copies rank order into
// column order, otherwise the reverse.
void permuteGridBlocks(const patterns::HierLayout& lay, const char* src, char* dst, size_t stride, size_t offset,
                       size_t len, bool toGrid);

// Segments of a hierarchical grid collective flowing through two phases, each a ring
// task on its own links (one across hosts, one inside the host): while segment s is in
// its second phase, segment s + 1 is in its first. Each phase runs its segments in order,
// at most two at once (the next may start once the previous has posted everything, so
// messages on shared links keep their order); `parity` (0 or 1) tells the two apart, for
// staging slots. beforeFirst and afterSecond may be empty.
struct TwoPhasePipeline {
  int segments = 1;
  std::function<void(int seg)> beforeFirst;
  std::function<RingTaskSpec(int seg, int parity)> first, second;
  std::function<void(int seg)> afterSecond;
};
void runTwoPhasePipeline(Team& comm, Progress& pg, const TwoPhasePipeline& p);

// Runs one ring task to completion through pg.
void runRingTask(Team& comm, Progress& pg, RingTaskSpec spec);

}  // namespace coll
