// Direct scatter: the root sends every rank its block straight from the input, all n - 1
// sends posted at once. One message latency and no copies beyond the root's own block,
// but the root pays the software cost of n - 1 messages: the choice for large blocks.
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "algorithms/exec.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

class DirectScatter final : public Algorithm {
 public:
  const char* name() const override { return "direct"; }
  const char* description() const override { return "the root sends to every rank at once"; }
  OpKind kind() const override { return OpKind::Scatter; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? 0 : fanEstimate(c, static_cast<double>(bytes));
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks(), r = comm.rank();
    const size_t block = a.count * typeSize(a.dtype);
    Progress pg(comm, "scatter (direct)");
    if (r != a.root) {
      Xfer x;
      pg.recv(a.root, a.recvbuf, block, &x, true, coldOutput(block));
      Xfer* xp = &x;
      pg.waitAll(&xp, 1);
      return;
    }
    const char* in = static_cast<const char*>(a.sendbuf);
    std::vector<Xfer> xs(static_cast<size_t>(n - 1));
    std::vector<Xfer*> ptrs;
    for (int s = 1; s < n; ++s) {
      const int to = (r + s) % n;
      pg.send(to, in + static_cast<size_t>(to) * block, block, &xs[s - 1]);
      ptrs.push_back(&xs[s - 1]);
    }
    const char* own = in + static_cast<size_t>(r) * block;
    if (own != a.recvbuf) memcpy(a.recvbuf, own, block);
    pg.waitAll(ptrs.data(), ptrs.size());
  }
};

}  // namespace

const Algorithm& directScatter() {
  static const DirectScatter algo;
  return algo;
}

}  // namespace coll
