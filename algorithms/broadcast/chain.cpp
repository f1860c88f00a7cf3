// Pipelined chain broadcast along the topology's ring order, starting at the root: every
// link carries the buffer once and chunks flow concurrently along the chain, so for large
// buffers the time approaches one buffer transfer whatever the number of ranks. The ring
// order keeps a host's ranks together, so the chain crosses the network once per host
// even when a launcher interleaves ranks across hosts.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "algorithms/cost_figures.hpp"
#include "topology/layout.hpp"
#include "algorithms/ring_stream.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

class ChainBroadcast final : public Algorithm {
 public:
  const char* name() const override { return "chain"; }
  const char* description() const override { return "pipelined chain from the root"; }
  OpKind kind() const override { return OpKind::Broadcast; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    return c.nranks() <= 1 ? 0 : chainEstimate(c, static_cast<double>(bytes), false);
  }

  void run(Team& comm, const OpArgs& a) const override {
    const int n = comm.nranks();
    const size_t bytes = a.count * typeSize(a.dtype);
    char* out = static_cast<char*>(a.recvbuf);
    const patterns::RingLayout& ring = comm.layouts().ring;
    const int me = ring.pos[comm.rank()], pos = modRank(me - ring.pos[a.root], n);
    // Out of place, the root sends from its send buffer and copies that into its own
    // receive buffer chunk by chunk in between, while the next rank pulls.
    const bool rootCopy = pos == 0 && a.sendbuf != a.recvbuf;
    if (rootCopy && n == 1) memcpy(out, a.sendbuf, bytes);
    if (n == 1) return;
    const char* src = rootCopy ? static_cast<const char*>(a.sendbuf) : out;
    const size_t chunk = pipelineChunkBytes(comm);
    const size_t depth = static_cast<size_t>(pipelineDepth(comm));
    const size_t nchunks = (bytes + chunk - 1) / chunk;
    const bool sends = pos != n - 1, recvs = pos != 0;
    const int next = ring.next(me), prev = ring.prev(me);
    std::vector<Xfer> sx(depth), rx(depth);
    size_t sPosted = 0, sDone = 0, rPosted = 0, rDone = 0, copied = rootCopy ? 0 : nchunks;
    const size_t sTotal = sends ? nchunks : 0, rTotal = recvs ? nchunks : 0;
    auto len = [&](size_t k) { return std::min(chunk, bytes - k * chunk); };
    Progress pg(comm, "broadcast (chain)");
    while (sDone < sTotal || rDone < rTotal || copied < nchunks) {
      bool acted = false;
      while (rPosted < rTotal && rPosted - rDone < depth) {
        // The chain's last rank forwards nothing: its output is not read again here.
        pg.recv(prev, out + rPosted * chunk, len(rPosted), &rx[rPosted % depth], true, !sends && coldOutput(bytes));
        ++rPosted;
        acted = true;
      }
      // A chunk is forwarded once it has arrived (the root has everything already).
      while (sPosted < sTotal && sPosted - sDone < depth && (!recvs || sPosted < rDone)) {
        pg.send(next, src + sPosted * chunk, len(sPosted), &sx[sPosted % depth]);
        ++sPosted;
        acted = true;
      }
      if (copied < nchunks) {
        memcpy(out + copied * chunk, src + copied * chunk, len(copied));
        ++copied;
        acted = true;
      }
      acted |= pg.poll();
      while (rDone < rPosted && rx[rDone % depth].complete) { ++rDone; acted = true; }
      while (sDone < sPosted && sx[sDone % depth].complete) { ++sDone; acted = true; }
      if (acted) pg.progressed();
      else pg.idle();
    }
  }
};

}  // namespace

const Algorithm& chainBroadcast() {
  static const ChainBroadcast algo;
  return algo;
}

}  // namespace coll
