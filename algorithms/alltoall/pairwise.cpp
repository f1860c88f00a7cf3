// All-to-all: every pair exchanges its blocks directly. All transfers are posted at
// once (each link has its own queue), so every link works at the same time.
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "algorithms/exec.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

class PairwiseAllToAll final : public Algorithm {
 public:
  const char* name() const override { return "pairwise"; }
  const char* description() const override { return "direct exchange with every peer at once"; }
  OpKind kind() const override { return OpKind::AllToAll; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? 0 : ringStepsEstimate(c, c.figures<RingHops>().rankRing, static_cast<double>(bytes), false);
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks(), r = comm.rank();
    const size_t block = a.count * typeSize(a.dtype);
    const char* in = static_cast<const char*>(a.sendbuf);
    char* out = static_cast<char*>(a.recvbuf);
    if (in == out && n > 1) {  // in place: what we send must survive what we receive
      char* copy = static_cast<char*>(comm.scratch(block * n, 1));
      memcpy(copy, in, block * n);
      in = copy;
    }
    if (in + r * block != out + r * block) memcpy(out + r * block, in + r * block, block);
    if (n == 1) return;
    std::vector<Xfer> xs(2 * (n - 1));
    std::vector<Xfer*> ptrs;
    Progress pg(comm, "all-to-all (pairwise)");
    for (int s = 1; s < n; ++s) {
      int to = (r + s) % n, from = modRank(r - s, n);
      pg.recv(from, out + from * block, block, &xs[2 * (s - 1)]);
      pg.send(to, in + to * block, block, &xs[2 * (s - 1) + 1]);
    }
    for (auto& x : xs) ptrs.push_back(&x);
    pg.waitAll(ptrs.data(), ptrs.size());
  }
};

}  // namespace

const Algorithm& pairwiseAllToAll() {
  static const PairwiseAllToAll algo;
  return algo;
}

}  // namespace coll
