// Binomial-tree gather: in round k every virtual rank with bit k as its lowest set bit
// sends all it holds (its own block and its subtree's, up to 2^k blocks, one message) to
// its parent. log2(n) rounds instead of the direct gather's n - 1 messages at the root:
// the choice for small blocks, where message costs dominate. Virtual ranks follow the
// topology's locality order from the root, so most subtrees stay inside a host.
//
// A node collects its subtree in virtual-rank order (scratch); the root receives a
// subtree straight into the output when its ranks are consecutive there, else into
// scratch, and puts those blocks in rank order at the end.
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

class TreeGather final : public Algorithm {
 public:
  const char* name() const override { return "tree"; }
  const char* description() const override { return "binomial tree into the root"; }
  OpKind kind() const override { return OpKind::Gather; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? std::numeric_limits<double>::infinity() : binomialEstimate(c, static_cast<double>(bytes));
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks(), r = comm.rank();
    const size_t block = a.count * typeSize(a.dtype);
    char* out = static_cast<char*>(a.recvbuf);
    if (n == 1) {
      if (a.sendbuf != out) memcpy(out, a.sendbuf, block);
      return;
    }
    const patterns::RingLayout& lay = comm.layouts().locality;
    const int rootPos = lay.pos[a.root];
    auto rankOf = [&](int v) { return lay.order[(rootPos + v) % n]; };
    const int v = modRank(lay.pos[r] - rootPos, n);
    const patterns::BinomialNode node = patterns::binomialNode(n, v);
    Progress pg(comm, "gather (tree)");
    if (node.children.empty()) {  // a leaf sends its own block from where it is
      Xfer x;
      pg.send(rankOf(node.parent), a.sendbuf, block, &x);
      Xfer* xp = &x;
      pg.waitAll(&xp, 1);
      return;
    }
    // Virtual rank u's block at (u - v) * block; the root needs it only for subtrees whose
    // ranks are not consecutive.
    bool staging = v != 0;
    for (int c : node.children) staging = staging || !patterns::consecutiveRanks(rankOf, c, patterns::binomialSpan(n, c));
    char* buf = staging ? static_cast<char*>(comm.scratch(static_cast<size_t>(node.span) * block, 1)) : nullptr;
    std::vector<Xfer> xs(node.children.size());
    std::vector<Xfer*> ptrs;
    std::vector<int> staged;  // the root's children whose subtrees land in scratch
    for (size_t i = 0; i < node.children.size(); ++i) {
      const int c = node.children[i], span = patterns::binomialSpan(n, c);
      const bool direct = v == 0 && patterns::consecutiveRanks(rankOf, c, span);
      if (v == 0 && !direct) staged.push_back(c);
      char* dst = direct ? out + static_cast<size_t>(rankOf(c)) * block : buf + static_cast<size_t>(c - v) * block;
      pg.recv(rankOf(c), dst, static_cast<size_t>(span) * block, &xs[i], true, v == 0 && coldOutput(static_cast<size_t>(n) * block));
      ptrs.push_back(&xs[i]);
    }
    if (v != 0) memcpy(buf, a.sendbuf, block);
    else if (a.sendbuf != out + static_cast<size_t>(r) * block) memcpy(out + static_cast<size_t>(r) * block, a.sendbuf, block);
    pg.waitAll(ptrs.data(), ptrs.size());
    if (v == 0) {
      for (int c : staged)
        for (int u = c; u < c + patterns::binomialSpan(n, c); ++u)
          memcpy(out + static_cast<size_t>(rankOf(u)) * block, buf + static_cast<size_t>(u) * block, block);
      return;
    }
    Xfer x;
    pg.send(rankOf(node.parent), buf, static_cast<size_t>(node.span) * block, &x);
    Xfer* xp = &x;
    pg.waitAll(&xp, 1);
  }
};

}  // namespace

const Algorithm& treeGather() {
  static const TreeGather algo;
  return algo;
}

}  // namespace coll
