// Recursive doubling all-reduce for small buffers: log2(n) exchanges of the whole
// buffer instead of 2(n-1) ring steps. Ranks beyond the largest power of two fold their
// data into a partner first and get the result back at the end.
//
// Bit-identical results: at every level both partners combine the same two partial
// values in the same operand order (lower rank's value first), so they agree exactly.
#include <bit>
#include <limits>
#include <cstring>

#include "algorithms/algorithm.hpp"
#include "cost/context.hpp"
#include "algorithms/exec.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

// Its rounds in rank order, as run() exchanges: the fold, log2(p2) rounds, the fold back.
struct RdRounds {
  explicit RdRounds(const CostContext& c) {
    const int n = c.nranks(), p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
    std::vector<std::pair<int, int>> fold;
    for (int r = p2; r < n; ++r) fold.push_back({r, r - p2});
    if (!fold.empty()) rounds.push_back(c.stage(fold));
    for (int mask = 1; mask < p2; mask <<= 1) {
      std::vector<std::pair<int, int>> round;
      for (int r = 0; r < p2; ++r) round.push_back({r, r ^ mask});
      rounds.push_back(c.stage(round));
    }
  }
  std::vector<Hop> rounds;
};

class RdAllReduce final : public Algorithm {
 public:
  const char* name() const override { return "rd"; }
  const char* description() const override { return "recursive doubling (small buffers)"; }
  OpKind kind() const override { return OpKind::AllReduce; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    if (c.nranks() <= 1) return std::numeric_limits<double>::infinity();
    const double s = static_cast<double>(bytes), o = c.params().msgUs;
    double t = 0;
    for (const Hop& h : c.figures<RdRounds>().rounds) t += h.time(s) + o + c.reduceUs(s);
    return t;
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks(), r = comm.rank();
    const size_t bytes = a.count * typeSize(a.dtype);
    char* buf = static_cast<char*>(a.recvbuf);
    if (a.sendbuf != a.recvbuf) memcpy(buf, a.sendbuf, bytes);
    if (n == 1) return;
    char* tmp = static_cast<char*>(comm.scratch(bytes, 2));
    int p2 = 1;
    while (p2 * 2 <= n) p2 *= 2;
    const int rem = n - p2;
    Progress pg(comm, "all-reduce (recursive doubling)");
    Xfer xs[2];
    Xfer* both[2] = {&xs[0], &xs[1]};
    if (r >= p2) {  // fold into r - p2, then wait for the answer
      pg.send(r - p2, buf, bytes, &xs[0]);
      pg.recv(r - p2, buf, bytes, &xs[1]);
      pg.waitAll(both, 2);
      return;
    }
    if (r < rem) {
      pg.recv(r + p2, tmp, bytes, &xs[0]);
      pg.waitAll(both, 1);
      reduceBuffers(buf, buf, tmp, a.count, a.dtype, a.op);
    }
    for (int mask = 1; mask < p2; mask <<= 1) {
      const int partner = r ^ mask;
      pg.recv(partner, tmp, bytes, &xs[0]);
      pg.send(partner, buf, bytes, &xs[1]);
      pg.waitAll(both, 2);
      if (r < partner) reduceBuffers(buf, buf, tmp, a.count, a.dtype, a.op);
      else reduceBuffers(buf, tmp, buf, a.count, a.dtype, a.op);
    }
    if (a.op == collAvg) finishAverage(buf, a.count, a.dtype, n);
    if (r < rem) {
      pg.send(r + p2, buf, bytes, &xs[0]);
      pg.waitAll(both, 1);
    }
  }
};

}  // namespace

const Algorithm& rdAllReduce() {
  static const RdAllReduce algo;
  return algo;
}

}  // namespace coll
