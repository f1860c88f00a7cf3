// All-gather for small blocks in ceil(log2 n) steps, for any n (Bruck's dissemination):
// at step s a rank sends everything it holds to the rank 2^s before it in locality order
// and receives as much from the rank 2^s after it. Blocks are collected in locality order
// relative to this rank in scratch and put in place at the end.
#include <limits>
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "cost/context.hpp"
#include "algorithms/group_ops.hpp"
#include "topology/layout.hpp"
#include "algorithms/team.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

// Its dissemination steps over the locality order (distance 1, 2, 4, ...).
struct BruckSteps {
  explicit BruckSteps(const CostContext& c) {
    const int n = c.nranks();
    const std::vector<int>& loc = c.layouts().locality.order;
    for (int d = 1; d < n; d *= 2) {
      std::vector<std::pair<int, int>> step;
      for (int pos = 0; pos < n; ++pos) step.push_back({loc[pos], loc[(pos - d % n + n) % n]});
      steps.push_back(c.stage(step));
    }
  }
  std::vector<Hop> steps;
};

class RdAllGather final : public Algorithm {
 public:
  const char* name() const override { return "rd"; }
  const char* description() const override { return "recursive doubling (Bruck dissemination, any n)"; }
  OpKind kind() const override { return OpKind::AllGather; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    if (c.nranks() <= 1) return std::numeric_limits<double>::infinity();
    const double n = c.nranks(), blk = static_cast<double>(bytes);
    double t = n * blk / (c.params().reduceGBs * 1e3), have = 1;
    for (const Hop& h : c.figures<BruckSteps>().steps) {
      const double m = std::min(have, n - have);
      t += h.time(m * blk) + c.params().msgUs;
      have += m;
    }
    return t;
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks();
    const size_t blk = a.count * typeSize(a.dtype);
    char* out = static_cast<char*>(a.recvbuf);
    char* own = out + static_cast<size_t>(comm.rank()) * blk;
    if (n == 1) {
      if (a.sendbuf != own) memcpy(own, a.sendbuf, blk);
      return;
    }
    const patterns::RingLayout& lay = comm.layouts().locality;
    const int me = lay.pos[comm.rank()];
    // tmp block j holds the block of locality position me + j.
    char* tmp = static_cast<char*>(comm.scratch(static_cast<size_t>(n) * blk, 3));
    memcpy(tmp, a.sendbuf, blk);
    Progress pg(comm, "all-gather (rd)");
    std::vector<Xfer> xs(2);
    for (int have = 1, d = 1; have < n; d *= 2) {
      const int m = std::min(have, n - have);
      xs.assign(2, Xfer{});
      pg.recv(lay.order[(me + d) % n], tmp + static_cast<size_t>(have) * blk, m * blk, &xs[0]);
      pg.send(lay.order[(me - d % n + n) % n], tmp, m * blk, &xs[1]);
      waitXfers(pg, xs);
      have += m;
    }
    for (int j = 0; j < n; ++j) {
      char* dst = out + static_cast<size_t>(lay.order[(me + j) % n]) * blk;
      if (j > 0 || dst != a.sendbuf) memcpy(dst, tmp + static_cast<size_t>(j) * blk, blk);
    }
  }
};

}  // namespace

const Algorithm& rdAllGather() {
  static const RdAllGather algo;
  return algo;
}

}  // namespace coll
