// Pipelined binary-tree reduce over the locality order, toward the root: log2(n) hops of
// latency instead of the chain's n - 1. Each inner node combines its own chunk with its
// children's in a fixed order (own, child 0, child 1) and passes the partial result up.
#include <limits>
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "topology/layout.hpp"
#include "algorithms/patterns/tree.hpp"
#include "algorithms/ring_stream.hpp"
#include "algorithms/team.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

class TreeReduce final : public Algorithm {
 public:
  const char* name() const override { return "tree"; }
  const char* description() const override { return "pipelined binary tree toward the root"; }
  OpKind kind() const override { return OpKind::Reduce; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? std::numeric_limits<double>::infinity() : rootedTreeEstimate(c, static_cast<double>(bytes), true);
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks();
    const size_t es = typeSize(a.dtype);
    const char* in = static_cast<const char*>(a.sendbuf);
    if (n == 1) {
      if (a.sendbuf != a.recvbuf) memcpy(a.recvbuf, a.sendbuf, a.count * es);
      return;
    }
    const patterns::RingLayout& lay = comm.layouts().locality;
    const patterns::TreeNode node = patterns::rootedTreeNode(n, lay.pos[a.root], lay.pos[comm.rank()]);
    const bool isRoot = node.parent < 0;
    const int kids = node.numChildren();
    const size_t ce = std::max<size_t>(1, pipelineChunkBytes(comm) / es);
    const size_t depth = static_cast<size_t>(pipelineDepth(comm));
    const size_t nchunks = (a.count + ce - 1) / ce;
    auto len = [&](size_t k) { return std::min(ce, a.count - k * ce); };
    // Per child a window of staging chunks, plus a window of partial results to send up
    // (a slot is free again when its send has completed).
    char* scratch = static_cast<char*>(comm.scratch(3 * depth * ce * es, 3));
    auto stage = [&](int j, size_t k) { return scratch + (j * depth + k % depth) * ce * es; };
    auto partial = [&](size_t k) {
      return isRoot ? static_cast<char*>(a.recvbuf) + k * ce * es : scratch + (2 * depth + k % depth) * ce * es;
    };
    std::vector<Xfer> rx[2] = {std::vector<Xfer>(depth), std::vector<Xfer>(depth)}, sx(depth);
    size_t rPosted[2] = {0, 0}, rDone[2] = {0, 0}, reduced = 0, sPosted = 0, sDone = 0;
    const size_t sTotal = isRoot ? 0 : nchunks;
    Progress pg(comm, "reduce (tree)");
    while (reduced < nchunks || sDone < sTotal) {
      bool acted = false;
      for (int j = 0; j < 2; ++j)
        while (node.children[j] >= 0 && rPosted[j] < nchunks && rPosted[j] - reduced < depth) {
          pg.recv(lay.order[node.children[j]], stage(j, rPosted[j]), len(rPosted[j]) * es, &rx[j][rPosted[j] % depth]);
          ++rPosted[j];
          acted = true;
        }
      acted |= pg.poll();
      for (int j = 0; j < 2; ++j)
        while (rDone[j] < rPosted[j] && rx[j][rDone[j] % depth].complete) { ++rDone[j]; acted = true; }
      while (reduced < nchunks && (kids < 1 || rDone[0] > reduced) && (kids < 2 || rDone[1] > reduced) &&
             (isRoot || reduced - sDone < depth)) {
        size_t k = reduced;
        char* dst = partial(k);
        if (kids > 0) reduceBuffers(dst, in + k * ce * es, stage(0, k), len(k), a.dtype, a.op);
        if (kids == 2) reduceBuffers(dst, dst, stage(1, k), len(k), a.dtype, a.op);
        if (isRoot && a.op == collAvg) finishAverage(dst, len(k), a.dtype, n);
        ++reduced;
        acted = true;
      }
      while (sPosted < sTotal && sPosted < reduced && sPosted - sDone < depth) {
        // A leaf sends its own data; an inner node its partial result.
        const char* up = kids == 0 ? in + sPosted * ce * es : partial(sPosted);
        pg.send(lay.order[node.parent], up, len(sPosted) * es, &sx[sPosted % depth]);
        ++sPosted;
        acted = true;
      }
      while (sDone < sPosted && sx[sDone % depth].complete) { ++sDone; acted = true; }
      if (acted) pg.progressed();
      else pg.idle();
    }
  }
};

}  // namespace

const Algorithm& treeReduce() {
  static const TreeReduce algo;
  return algo;
}

}  // namespace coll
