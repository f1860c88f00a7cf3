// All-gather for small blocks in ceil(log2 n) steps, for any n (Bruck's dissemination):
// at step s a rank sends everything it holds to the rank 2^s before it in locality order
// and receives as much from the rank 2^s after it. Blocks are collected in locality order
// relative to this rank in scratch and put in place at the end.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/group_ops.hpp"
#include "algorithms/patterns/layout.hpp"
#include "core/comm.hpp"
#include "core/types.hpp"
#include "tuning/cost_model.hpp"

namespace coll {
namespace {

class RdAllGather final : public Algorithm {
 public:
  const char* name() const override { return "rd"; }
  const char* description() const override { return "recursive doubling (Bruck dissemination, any n)"; }
  OpKind kind() const override { return OpKind::AllGather; }
  bool supports(const Comm&, const OpArgs&) const override { return true; }

  void run(Comm& comm, const OpArgs& a) const override {
    const int n = comm.nranks();
    const size_t blk = a.count * typeSize(a.dtype);
    char* out = static_cast<char*>(a.recvbuf);
    char* own = out + static_cast<size_t>(comm.rank()) * blk;
    if (n == 1) {
      if (a.sendbuf != own) memcpy(own, a.sendbuf, blk);
      return;
    }
    const patterns::RingLayout& lay = comm.costModel().locality();
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
