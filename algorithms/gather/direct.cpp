// Direct gather: every rank sends its block straight to the root, which posts all n - 1
// receives at once, each into its place in the output. One message latency for the
// whole operation and no copies beyond the root's own block, but the root pays the
// software cost of n - 1 messages: the choice for large blocks.
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "algorithms/exec.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

class DirectGather final : public Algorithm {
 public:
  const char* name() const override { return "direct"; }
  const char* description() const override { return "every rank sends to the root at once"; }
  OpKind kind() const override { return OpKind::Gather; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? 0 : fanEstimate(c, static_cast<double>(bytes));
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks(), r = comm.rank();
    const size_t block = a.count * typeSize(a.dtype);
    Progress pg(comm, "gather (direct)");
    if (r != a.root) {
      Xfer x;
      pg.send(a.root, a.sendbuf, block, &x);
      Xfer* xp = &x;
      pg.waitAll(&xp, 1);
      return;
    }
    char* out = static_cast<char*>(a.recvbuf);
    std::vector<Xfer> xs(static_cast<size_t>(n - 1));
    std::vector<Xfer*> ptrs;
    // Nearest ranks first, as the senders are all ready at about the same time.
    for (int s = 1; s < n; ++s) {
      const int from = (r + s) % n;
      pg.recv(from, out + static_cast<size_t>(from) * block, block, &xs[s - 1], true, coldOutput(static_cast<size_t>(n) * block));
      ptrs.push_back(&xs[s - 1]);
    }
    char* own = out + static_cast<size_t>(r) * block;
    if (a.sendbuf != own) memcpy(own, a.sendbuf, block);
    pg.waitAll(ptrs.data(), ptrs.size());
  }
};

}  // namespace

const Algorithm& directGather() {
  static const DirectGather algo;
  return algo;
}

}  // namespace coll
