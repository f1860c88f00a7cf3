// One-shot all-reduce for tiny buffers: every rank sends its whole buffer to every other
// rank at once, then folds all n buffers itself. One round where recursive doubling has
// log2(n): where ranks share CPUs, every round waits for the peers to be scheduled, and
// the one-shot waits once. The price is n-1 messages and n-1 folds per rank, so it only
// pays while n x bytes stays small (kOneShotMaxTotalBytes, kOneShotMaxRanks) and the cost
// model says so.
//
// Bit-identical results: every rank folds the same n buffers in rank order
// (((x0 op x1) op x2) ...), so all of them compute the same value.
#include <limits>
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "cost/context.hpp"
#include "algorithms/exec.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {

namespace {

// All pairs at once. Each rank copies to its same-host peers one after the other; the
// inter-host flows share the hosts' links.
struct OneShotHops {
  explicit OneShotHops(const CostContext& c) {
    const int n = c.nranks();
    const JobTopo& job = c.job();
    std::vector<std::pair<int, int>> pairs, across;
    for (int a = 0; n <= kOneShotMaxRanks && a < n; ++a) {
      double perByte = 0;
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        pairs.push_back({a, b});
        if (job.hostOf(a) != job.hostOf(b)) across.push_back({a, b});
        else perByte += 1.0 / (std::max(1e-6, job.link(a, b).bwGBs) * 1e3);
      }
      localUsPerByte = std::max(localUsPerByte, perByte);
    }
    all = c.stage(pairs);
    net = c.stage(across);
  }
  Hop all;                    // every rank to every other at once
  Hop net;                    // the inter-host flows of that stage alone
  double localUsPerByte = 0;  // one rank's copies to its same-host peers, per byte
};

class OneShotAllReduce final : public Algorithm {
 public:
  const char* name() const override { return "oneshot"; }
  const char* description() const override { return "one-shot: all-to-all of the whole buffer, local fold (tiny buffers)"; }
  OpKind kind() const override { return OpKind::AllReduce; }
  bool supports(const CostContext& c, const OpArgs& a) const override {
    return c.nranks() <= kOneShotMaxRanks &&
           a.count * typeSize(a.dtype) * static_cast<size_t>(c.nranks()) <= kOneShotMaxTotalBytes;
  }

  double estimate(const CostContext& c, size_t bytes) const override {
    const double n = c.nranks(), s = static_cast<double>(bytes), o = c.params().msgUs;
    if (c.nranks() <= 1 || c.nranks() > kOneShotMaxRanks || n * s > kOneShotMaxTotalBytes) return std::numeric_limits<double>::infinity();
    const OneShotHops& h = c.figures<OneShotHops>();
    // One stage: the n-1 messages are posted together, so a rank waits for its peers to
    // be scheduled once (one msgUs), and each further message costs only its software
    // part; then it folds the n buffers.
    const double copy = c.params().overlap(h.localUsPerByte * s, h.net.wire(s));
    return h.all.latUs + o + (n - 2) * (o - c.params().oversubUs) + copy + (n - 1) * c.reduceUs(s);
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks(), r = comm.rank();
    const size_t bytes = a.count * typeSize(a.dtype);
    char* buf = static_cast<char*>(a.recvbuf);
    if (n == 1) {
      if (a.sendbuf != a.recvbuf) memcpy(buf, a.sendbuf, bytes);
      return;
    }
    // Slot i of the scratch holds rank i's buffer; this rank's own goes in slot r.
    char* all = static_cast<char*>(comm.scratch(bytes * n, 2));
    memcpy(all + r * bytes, a.sendbuf, bytes);
    Progress pg(comm, "all-reduce (one-shot)");
    // Two transfers per peer; on the stack for the few ranks this usually runs on.
    constexpr int kInlinePeers = 8;
    Xfer local[2 * kInlinePeers];
    Xfer* localPtrs[2 * kInlinePeers];
    std::vector<Xfer> heap;
    std::vector<Xfer*> heapPtrs;
    if (n - 1 > kInlinePeers) {
      heap.resize(2 * (n - 1));
      heapPtrs.resize(2 * (n - 1));
    }
    Xfer* xs = heap.empty() ? local : heap.data();
    Xfer** ptrs = heap.empty() ? localPtrs : heapPtrs.data();
    for (int k = 1; k < n; ++k) {
      const int from = (r - k + n) % n;
      pg.recv(from, all + from * bytes, bytes, &xs[2 * (k - 1)]);
    }
    for (int k = 1; k < n; ++k) pg.send((r + k) % n, all + r * bytes, bytes, &xs[2 * (k - 1) + 1]);
    for (int i = 0; i < 2 * (n - 1); ++i) ptrs[i] = &xs[i];
    pg.waitAll(ptrs, 2 * (n - 1));
    reduceBuffers(buf, all, all + bytes, a.count, a.dtype, a.op);
    for (int i = 2; i < n; ++i) reduceBuffers(buf, buf, all + i * bytes, a.count, a.dtype, a.op);
    if (a.op == collAvg) finishAverage(buf, a.count, a.dtype, n);
  }
};

}  // namespace

const Algorithm& oneShotAllReduce() {
  static const OneShotAllReduce algo;
  return algo;
}

}  // namespace coll
