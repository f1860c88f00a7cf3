// Binomial-tree scatter, the gather tree run backwards: a node receives its whole
// subtree's blocks from its parent in one message, keeps its own and sends each child
// its subtree's, the largest first. log2(n) rounds instead of the direct scatter's n - 1
// messages at the root: the choice for small blocks. Virtual ranks follow the topology's
// locality order from the root, so most subtrees stay inside a host.
//
// A node holds its subtree in virtual-rank order (scratch); the root sends a subtree
// straight from the input when its ranks are consecutive there, else from scratch, where
// it first puts those blocks in virtual-rank order.
#include <limits>
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "algorithms/exec.hpp"
#include "algorithms/patterns/binomial.hpp"
#include "topology/layout.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

class TreeScatter final : public Algorithm {
 public:
  const char* name() const override { return "tree"; }
  const char* description() const override { return "binomial tree from the root"; }
  OpKind kind() const override { return OpKind::Scatter; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? std::numeric_limits<double>::infinity() : binomialEstimate(c, static_cast<double>(bytes));
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks(), r = comm.rank();
    const size_t block = a.count * typeSize(a.dtype);
    const char* in = static_cast<const char*>(a.sendbuf);
    char* mine = static_cast<char*>(a.recvbuf);
    if (n == 1) {
      if (in != mine) memcpy(mine, in, block);
      return;
    }
    const patterns::RingLayout& lay = comm.layouts().locality;
    const int rootPos = lay.pos[a.root];
    auto rankOf = [&](int v) { return lay.order[(rootPos + v) % n]; };
    const int v = modRank(lay.pos[r] - rootPos, n);
    const patterns::BinomialNode node = patterns::binomialNode(n, v);
    Progress pg(comm, "scatter (tree)");
    if (v != 0 && node.children.empty()) {  // a leaf receives its block where it belongs
      Xfer x;
      pg.recv(rankOf(node.parent), mine, block, &x, true, coldOutput(block));
      Xfer* xp = &x;
      pg.waitAll(&xp, 1);
      return;
    }
    // Virtual rank u's block at (u - v) * block; the root needs it only for subtrees whose
    // ranks are not consecutive.
    bool staging = v != 0;
    for (int c : node.children) staging = staging || !patterns::consecutiveRanks(rankOf, c, patterns::binomialSpan(n, c));
    char* buf = staging ? static_cast<char*>(comm.scratch(static_cast<size_t>(node.span) * block, 1)) : nullptr;
    if (v != 0) {
      Xfer x;
      pg.recv(rankOf(node.parent), buf, static_cast<size_t>(node.span) * block, &x, true);
      Xfer* xp = &x;
      pg.waitAll(&xp, 1);
    }
    std::vector<Xfer> xs(node.children.size());
    std::vector<Xfer*> ptrs;
    // The farthest child heads the largest subtree, whose blocks have the longest way to go.
    for (size_t i = node.children.size(); i-- > 0;) {
      const int c = node.children[i], span = patterns::binomialSpan(n, c);
      const bool direct = v == 0 && patterns::consecutiveRanks(rankOf, c, span);
      if (v == 0 && !direct)
        for (int u = c; u < c + span; ++u)
          memcpy(buf + static_cast<size_t>(u) * block, in + static_cast<size_t>(rankOf(u)) * block, block);
      const char* src = direct ? in + static_cast<size_t>(rankOf(c)) * block : buf + static_cast<size_t>(c - v) * block;
      pg.send(rankOf(c), src, static_cast<size_t>(span) * block, &xs[i]);
      ptrs.push_back(&xs[i]);
    }
    const char* own = v == 0 ? in + static_cast<size_t>(r) * block : buf;
    if (own != mine) memcpy(mine, own, block);
    pg.waitAll(ptrs.data(), ptrs.size());
  }
};

}  // namespace

const Algorithm& treeScatter() {
  static const TreeScatter algo;
  return algo;
}

}  // namespace coll
