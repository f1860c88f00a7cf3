// Pipelined binary-tree broadcast over the locality order: the root's tree has depth
// log2(n), so the first chunk reaches every rank after log2(n) hops instead of the
// chain's n - 1; each inner node forwards every chunk to two children, which halves its
// link's throughput, so the chain stays better for large buffers.
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
#include "base/types.hpp"

namespace coll {
namespace {

class TreeBroadcast final : public Algorithm {
 public:
  const char* name() const override { return "tree"; }
  const char* description() const override { return "pipelined binary tree from the root"; }
  OpKind kind() const override { return OpKind::Broadcast; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? std::numeric_limits<double>::infinity() : rootedTreeEstimate(c, static_cast<double>(bytes), false);
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks();
    const size_t bytes = a.count * typeSize(a.dtype);
    char* out = static_cast<char*>(a.recvbuf);
    if (comm.rank() == a.root && a.sendbuf != a.recvbuf) memcpy(out, a.sendbuf, bytes);
    if (n == 1) return;
    const patterns::RingLayout& lay = comm.layouts().locality;
    const patterns::TreeNode node = patterns::rootedTreeNode(n, lay.pos[a.root], lay.pos[comm.rank()]);
    const size_t chunk = pipelineChunkBytes(comm), depth = static_cast<size_t>(pipelineDepth(comm));
    const size_t nchunks = (bytes + chunk - 1) / chunk;
    auto len = [&](size_t k) { return std::min(chunk, bytes - k * chunk); };
    const bool recvs = node.parent >= 0;
    std::vector<Xfer> rx(depth), sx[2] = {std::vector<Xfer>(depth), std::vector<Xfer>(depth)};
    size_t rPosted = 0, rDone = recvs ? 0 : nchunks, sPosted[2] = {0, 0}, sDone[2] = {0, 0};
    size_t sTotal[2];
    for (int j = 0; j < 2; ++j) sTotal[j] = node.children[j] >= 0 ? nchunks : 0;
    Progress pg(comm, "broadcast (tree)");
    while (rDone < nchunks || sDone[0] < sTotal[0] || sDone[1] < sTotal[1]) {
      bool acted = false;
      while (recvs && rPosted < nchunks && rPosted - rDone < depth) {
        // A leaf forwards nothing: its output is not read again here.
        pg.recv(lay.order[node.parent], out + rPosted * chunk, len(rPosted), &rx[rPosted % depth], true,
                sTotal[0] + sTotal[1] == 0);
        ++rPosted;
        acted = true;
      }
      for (int j = 0; j < 2; ++j)  // a chunk is forwarded once it has arrived
        while (sPosted[j] < sTotal[j] && sPosted[j] - sDone[j] < depth && sPosted[j] < rDone) {
          pg.send(lay.order[node.children[j]], out + sPosted[j] * chunk, len(sPosted[j]), &sx[j][sPosted[j] % depth]);
          ++sPosted[j];
          acted = true;
        }
      acted |= pg.poll();
      while (rDone < rPosted && rx[rDone % depth].complete) { ++rDone; acted = true; }
      for (int j = 0; j < 2; ++j)
        while (sDone[j] < sPosted[j] && sx[j][sDone[j] % depth].complete) { ++sDone[j]; acted = true; }
      if (acted) pg.progressed();
      else pg.idle();
    }
  }
};

}  // namespace

const Algorithm& treeBroadcast() {
  static const TreeBroadcast algo;
  return algo;
}

}  // namespace coll
