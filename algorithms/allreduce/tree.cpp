// Pipelined double binary tree all-reduce. Each half of the buffer has its own binary
// tree over the locality order; chunks are reduced on their way up to the tree's root and
// broadcast on their way down, all chunks and both trees in flight at once. Latency grows
// with log2(n) instead of n, and because the second tree is the first one mirrored (or
// shifted), a rank that forwards for one tree is mostly a leaf of the other.
//
// Matching order: a link delivers messages in posting order, and two trees may use the
// same link (up in one, down in the other). Each message gets a slot in a static
// schedule, tau = chunk + height of the sender (up) or chunk + bound + depth of the sender
// (down), and both ends post a link's messages sorted by (tau, tree). Every message
// depends only on messages with a smaller tau, so this order never deadlocks.
//
// Bit-identical results: each element is reduced once, at the root of its tree, and the
// root's bits are copied down.
#include <limits>
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "cost/context.hpp"
#include "topology/layout.hpp"
#include "algorithms/patterns/tree.hpp"
#include "algorithms/ring_stream.hpp"
#include "algorithms/team.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

// The double binary tree over the locality order: both trees' edges at once, its depth,
// and the messages per chunk at the busiest rank (a rank sends and receives two per tree
// it is not the root of, one up and one down, and two per child).
struct TreeHops {
  explicit TreeHops(const CostContext& c) {
    const int n = c.nranks();
    const std::vector<int>& loc = c.layouts().locality.order;
    std::vector<std::pair<int, int>> all;
    for (int t = 0; t < 2; ++t)
      for (int pos = 0; pos < n; ++pos) {
        patterns::TreeNode node = patterns::dtreeNode(n, t, pos);
        if (node.parent >= 0) all.push_back({loc[pos], loc[node.parent]});
      }
    edges = c.stage(all);
    depth = patterns::treeDepth(n);
    for (int pos = 0; pos < n; ++pos) {
      int msgs = 0;
      for (int t = 0; t < 2; ++t) {
        const patterns::TreeNode node = patterns::dtreeNode(n, t, pos);
        msgs += 2 * node.numChildren() + (node.parent >= 0 ? 2 : 0);
      }
      msgsPerChunk = std::max(msgsPerChunk, msgs);
    }
  }
  Hop edges;
  int depth = 0;
  int msgsPerChunk = 0;
};

struct Msg {
  long tau;
  int tree;
  bool up;
  size_t k;
  bool operator<(const Msg& o) const { return tau != o.tau ? tau < o.tau : tree < o.tree; }
};

struct PeerQ {
  int rank = -1;
  std::vector<Msg> sends, recvs;
  std::vector<Xfer> sx, rx;
  size_t sPosted = 0, sDone = 0, rPosted = 0, rDone = 0;
};

struct TreeState {
  patterns::TreeNode node;  // locality-order positions
  size_t off = 0, cnt = 0, chunks = 0;
  size_t reduced = 0;       // chunks combined here (in order)
  size_t final = 0;         // chunks holding the final result here (in order)
  size_t arrived[2] = {0, 0};
  int childQ[2] = {-1, -1}, parentQ = -1;
  bool leaf() const { return node.numChildren() == 0; }
  bool root() const { return node.parent < 0; }
};

class TreeRun {
 public:
  TreeRun(Team& comm, const OpArgs& a) : a_(a), pg_(comm, "all-reduce (tree)"), n_(comm.nranks()) {
    es_ = typeSize(a.dtype);
    ce_ = std::max<size_t>(1, pipelineChunkBytes(comm) / es_);
    depth_ = static_cast<size_t>(pipelineDepth(comm));
    const patterns::RingLayout& lay = comm.layouts().locality;
    const int me = lay.pos[comm.rank()];
    stageDepth_ = depth_ + patterns::treeHeightBound(n_);
    Blocks halves = Blocks::split(a.count, 2);
    for (int t = 0; t < 2; ++t) {
      TreeState& ts = trees_[t];
      ts.node = patterns::dtreeNode(n_, t, me);
      ts.off = halves.off(t);
      ts.cnt = halves.cnt(t);
      ts.chunks = (ts.cnt + ce_ - 1) / ce_;
      schedule(t, lay);
    }
    for (PeerQ& q : peers_) {
      std::sort(q.sends.begin(), q.sends.end());
      std::sort(q.recvs.begin(), q.recvs.end());
      q.sx.resize(depth_);
      q.rx.resize(depth_);
    }
    // Staging only needs as many chunks as a tree has, of at most a half's size.
    stageDepth_ = std::min(stageDepth_, std::max<size_t>(1, trees_[0].chunks));
    stageElems_ = std::min(ce_, std::max<size_t>(1, trees_[0].cnt));
    stage_ = static_cast<char*>(comm.scratch(4 * stageDepth_ * stageElems_ * es_, 3));
  }

  void run() {
    for (;;) {
      bool acted = false, busy = false;
      for (PeerQ& q : peers_) acted |= post(q);
      acted |= pg_.poll();
      for (PeerQ& q : peers_) acted |= complete(q);
      for (int t = 0; t < 2; ++t) acted |= reduce(t);
      for (const PeerQ& q : peers_) busy |= q.sDone < q.sends.size() || q.rDone < q.recvs.size();
      if (!busy) return;
      if (acted) pg_.progressed();
      else pg_.idle();
    }
  }

 private:
  int queueOf(int rank) {
    for (size_t i = 0; i < peers_.size(); ++i)
      if (peers_[i].rank == rank) return static_cast<int>(i);
    peers_.push_back(PeerQ{});
    peers_.back().rank = rank;
    return static_cast<int>(peers_.size()) - 1;
  }

  // This rank's messages of tree t, with the slot both ends compute for them.
  void schedule(int t, const patterns::RingLayout& lay) {
    TreeState& ts = trees_[t];
    const long bound = patterns::treeHeightBound(n_);
    for (int j = 0; j < 2; ++j) {
      int c = ts.node.children[j];
      if (c < 0) continue;
      ts.childQ[j] = queueOf(lay.order[c]);
      long childHeight = patterns::dtreeNode(n_, t, c).height;
      for (size_t k = 0; k < ts.chunks; ++k) {
        peers_[ts.childQ[j]].recvs.push_back({static_cast<long>(k) + childHeight, t, true, k});
        peers_[ts.childQ[j]].sends.push_back({static_cast<long>(k) + bound + ts.node.depth, t, false, k});
      }
    }
    if (!ts.root()) {
      ts.parentQ = queueOf(lay.order[ts.node.parent]);
      for (size_t k = 0; k < ts.chunks; ++k) {
        peers_[ts.parentQ].sends.push_back({static_cast<long>(k) + ts.node.height, t, true, k});
        peers_[ts.parentQ].recvs.push_back({static_cast<long>(k) + bound + ts.node.depth - 1, t, false, k});
      }
    }
  }

  size_t len(const TreeState& ts, size_t k) const { return std::min(ce_, ts.cnt - k * ce_); }
  size_t at(const TreeState& ts, size_t k) const { return (ts.off + k * ce_) * es_; }
  char* stage(int t, int j, size_t k) const {
    return stage_ + ((t * 2 + j) * stageDepth_ + k % stageDepth_) * stageElems_ * es_;
  }
  int childIndex(const TreeState& ts, const PeerQ& q) const {
    return ts.childQ[0] >= 0 && &q == &peers_[ts.childQ[0]] ? 0 : 1;
  }

  bool post(PeerQ& q) {
    bool acted = false;
    char* out = static_cast<char*>(a_.recvbuf);
    while (q.rPosted < q.recvs.size() && q.rPosted - q.rDone < depth_) {
      const Msg& m = q.recvs[q.rPosted];
      const TreeState& ts = trees_[m.tree];
      if (m.up && m.k >= ts.reduced + stageDepth_) break;  // its staging slot is still in use
      char* into = m.up ? stage(m.tree, childIndex(ts, q), m.k) : out + at(ts, m.k);
      pg_.recv(q.rank, into, len(ts, m.k) * es_, &q.rx[q.rPosted % depth_]);
      ++q.rPosted;
      acted = true;
    }
    while (q.sPosted < q.sends.size() && q.sPosted - q.sDone < depth_) {
      const Msg& m = q.sends[q.sPosted];
      const TreeState& ts = trees_[m.tree];
      bool ready = m.up ? (ts.leaf() || ts.reduced > m.k) : ts.final > m.k;
      if (!ready) break;
      const char* from = (m.up && ts.leaf() ? static_cast<const char*>(a_.sendbuf) : out) + at(ts, m.k);
      pg_.send(q.rank, from, len(ts, m.k) * es_, &q.sx[q.sPosted % depth_]);
      ++q.sPosted;
      acted = true;
    }
    return acted;
  }

  bool complete(PeerQ& q) {
    bool acted = false;
    while (q.rDone < q.rPosted && q.rx[q.rDone % depth_].complete) {
      const Msg& m = q.recvs[q.rDone];
      TreeState& ts = trees_[m.tree];
      if (m.up) ++ts.arrived[childIndex(ts, q)];
      else ++ts.final;
      ++q.rDone;
      acted = true;
    }
    while (q.sDone < q.sPosted && q.sx[q.sDone % depth_].complete) {
      ++q.sDone;
      acted = true;
    }
    return acted;
  }

  // Combines, in chunk order, every chunk whose children's parts have all arrived:
  // own contribution, then child 0, then child 1.
  bool reduce(int t) {
    TreeState& ts = trees_[t];
    if (ts.leaf()) return false;
    bool acted = false;
    char* out = static_cast<char*>(a_.recvbuf);
    const char* in = static_cast<const char*>(a_.sendbuf);
    while (ts.reduced < ts.chunks) {
      size_t k = ts.reduced;
      bool ready = true;
      for (int j = 0; j < 2; ++j) ready &= ts.node.children[j] < 0 || ts.arrived[j] > k;
      if (!ready) break;
      const char* acc = in + at(ts, k);
      for (int j = 0; j < 2; ++j) {
        if (ts.node.children[j] < 0) continue;
        reduceBuffers(out + at(ts, k), acc, stage(t, j, k), len(ts, k), a_.dtype, a_.op);
        acc = out + at(ts, k);
      }
      ++ts.reduced;
      if (ts.root()) {
        if (a_.op == collAvg) finishAverage(out + at(ts, k), len(ts, k), a_.dtype, n_);
        ts.final = ts.reduced;
      }
      acted = true;
    }
    return acted;
  }

  const OpArgs& a_;
  Progress pg_;
  int n_;
  size_t es_ = 1, ce_ = 1, depth_ = 1, stageDepth_ = 1, stageElems_ = 1;
  TreeState trees_[2];
  std::vector<PeerQ> peers_;
  char* stage_ = nullptr;
};

class TreeAllReduce final : public Algorithm {
 public:
  const char* name() const override { return "tree"; }
  const char* description() const override { return "pipelined double binary tree"; }
  OpKind kind() const override { return OpKind::AllReduce; }
  bool supports(const CostContext&, const OpArgs&) const override { return true; }

  double estimate(const CostContext& c, size_t bytes) const override {
    if (c.nranks() <= 1) return std::numeric_limits<double>::infinity();
    const TreeHops& h = c.figures<TreeHops>();
    const double o = c.params().msgUs;
    // A message cost o covers one send and one receive, as on a ring step. The fill
    // carries the first chunk of each half up the tree (per level a parent takes two
    // children's chunks, reduces both and sends one on) and down (takes one, sends two);
    // the other chunks follow one per period of the busiest rank.
    const double half = static_cast<double>(bytes) / 2, ch = std::min<double>(c.params().chunkBytes, half);
    const double up = h.edges.latUs + 1.5 * o + h.edges.wire(ch) + 2 * c.reduceUs(ch);
    const double down = h.edges.latUs + 1.5 * o + 2 * h.edges.wire(ch);
    const double period = c.params().overlap(4 * h.edges.wire(ch), 2 * c.reduceUs(ch)) + h.msgsPerChunk / 2.0 * o;
    return h.depth * (up + down) + (c.chunksOf(half) - 1) * period;
  }

  void run(Team& comm, const OpArgs& a) const override {
    if (comm.nranks() == 1) {
      if (a.sendbuf != a.recvbuf) memcpy(a.recvbuf, a.sendbuf, a.count * typeSize(a.dtype));
      return;
    }
    TreeRun(comm, a).run();
  }
};

}  // namespace

const Algorithm& treeAllReduce() {
  static const TreeAllReduce algo;
  return algo;
}

}  // namespace coll
