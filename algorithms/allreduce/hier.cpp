// Hierarchical all-reduce for jobs that span hosts.
//
// Large buffers: an intra-host ring reduce-scatter leaves local rank i with slice i of
// its host's sum; then one ring per local index runs across hosts on that slice (so every
// rank, and with it every NIC and link, carries inter-host traffic, and each host sends
// the bandwidth minimum 2(H-1)/H of the buffer); then an intra-host ring all-gather. The
// buffer is cut into segments that flow through the three phases like a pipeline: while
// segment s crosses hosts, the intra-host ring works on segments s+1 and s-1.
//
// Small buffers: local ranks send to their host's leader, which reduces in local-index
// order; the leaders run recursive doubling (one inter-host crossing per round, all in
// parallel: a single crossing for two hosts); each leader sends the result back.
//
// Bit-identical results: every slice is summed once inside a host and once across hosts
// by rings that compute each element at one rank and copy it; the leaders' recursive
// doubling combines in the same operand order on both sides of every exchange.
#include <limits>
#include <algorithm>
#include <cstring>
#include <deque>

#include "algorithms/algorithm.hpp"
#include "algorithms/hier_cost.hpp"
#include "algorithms/group_ops.hpp"
#include "topology/layout.hpp"
#include "algorithms/ring_stream.hpp"
#include "algorithms/ring_task.hpp"
#include "algorithms/team.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {

namespace {

// Comm::scratch slots: two per channel, for its two tasks that may overlap.
constexpr int kIntraSlot = 3, kInterSlot = 4, kInterSlot2 = 5, kIntraSlot2 = 6;

class HierRun {
 public:
  HierRun(Team& comm, const OpArgs& a, const patterns::HierLayout& lay, int host, int local, int segments)
      : comm_(comm), a_(a), pg_(comm, "all-reduce (hier)"), es_(typeSize(a.dtype)),
        L_(static_cast<int>(lay.grid[host].size())), H_(lay.nhosts()), G_(segments), host_(host), local_(local),
        row_(lay.grid[host]), col_(lay.column(local)) {
    in_ = static_cast<const char*>(a.sendbuf);
    out_ = static_cast<char*>(a.recvbuf);
    seg_ = Blocks::split(a.count, G_);
    // The intra-host ring always runs one reduce-scatter ahead of the all-gathers.
    for (int s = 0; s < G_ && L_ > 1; ++s) {
      intraOps_.push_back({false, s});
      if (s > 0) intraOps_.push_back({true, s - 1});
    }
    if (L_ > 1) intraOps_.push_back({true, G_ - 1});
    rsDone_.assign(G_, L_ == 1);
    arDone_.assign(G_, false);
  }

  void run() {
    while (nextIntra_ < intraOps_.size() || !intra_.empty() || nextInter_ < G_ || !inter_.empty()) {
      bool acted = startTasks();
      for (Task& t : intra_) acted |= t.ring.pump();
      for (Task& t : inter_) acted |= t.ring.pump();
      acted |= pg_.poll();
      acted |= finishTasks();
      if (acted) pg_.progressed();
      else pg_.idle();
    }
  }

 private:
  struct Step {
    bool gather;
    int seg;
  };
  struct Task {
    Task(Team& c, Progress& pg, RingTaskSpec spec, Step op) : ring(c, pg, std::move(spec)), op(op) {}
    RingTask ring;
    Step op;
  };

  Blocks slices(int s) const { return Blocks::split(seg_.cnt(s), L_); }

  // A channel (intra- or inter-host links) runs its tasks in a fixed order; the next one
  // may start once the previous one has posted everything, so that segment boundaries do
  // not drain the pipeline. At most two per channel, each with its own staging slot.
  static bool channelFree(const std::deque<Task>& ch) {
    return ch.empty() || (ch.size() == 1 && ch.back().ring.allPosted());
  }

  bool startTasks() {
    bool acted = false;
    while (nextIntra_ < intraOps_.size() && channelFree(intra_)) {
      Step op = intraOps_[nextIntra_];
      if (op.gather && !arDone_[op.seg]) break;
      const int slot = nextIntra_ % 2 ? kIntraSlot2 : kIntraSlot;
      intra_.emplace_back(comm_, pg_, op.gather ? gatherSpec(op.seg) : scatterSpec(op.seg, slot), op);
      ++nextIntra_;
      acted = true;
    }
    while (nextInter_ < G_ && rsDone_[nextInter_] && channelFree(inter_)) {
      const int slot = nextInter_ % 2 ? kInterSlot2 : kInterSlot;
      inter_.emplace_back(comm_, pg_, acrossSpec(nextInter_, slot), Step{false, nextInter_});
      ++nextInter_;
      acted = true;
    }
    return acted;
  }

  bool finishTasks() {
    bool acted = false;
    while (!intra_.empty() && intra_.front().ring.done()) {
      if (!intra_.front().op.gather) rsDone_[intra_.front().op.seg] = true;
      intra_.pop_front();
      acted = true;
    }
    while (!inter_.empty() && inter_.front().ring.done()) {
      arDone_[inter_.front().op.seg] = true;
      inter_.pop_front();
      acted = true;
    }
    return acted;
  }

  RingTaskSpec common(const std::vector<int>& members, int pos) const {
    RingTaskSpec s;
    s.members = members;
    s.pos = pos;
    s.dt = a_.dtype;
    s.op = a_.op;
    return s;
  }

  // Local rank i ends with slice i of the segment summed over its host, in recvbuf.
  RingTaskSpec scatterSpec(int seg, int slot) const {
    RingTaskSpec s = common(row_, local_);
    s.blocks = slices(seg);
    s.base = modRank(local_ - 1, L_);
    s.steps = s.reduceSteps = L_ - 1;
    s.local = in_ + seg_.off(seg) * es_;
    s.firstSrc = s.local + s.blocks.off(s.base) * es_;
    s.dst = out_ + seg_.off(seg) * es_;
    s.scratchSlot = slot;
    return s;
  }

  // Ring all-reduce of this rank's slice with the same local index on every host.
  RingTaskSpec acrossSpec(int seg, int slot) const {
    Blocks sl = slices(seg);
    size_t off = (seg_.off(seg) + sl.off(local_)) * es_;
    RingTaskSpec s = common(col_, host_);
    s.blocks = Blocks::split(sl.cnt(local_), H_);
    s.base = host_;
    s.steps = 2 * (H_ - 1);
    s.reduceSteps = H_ - 1;
    s.local = (L_ == 1 ? in_ : out_) + off;  // one rank per host: nothing was reduced yet
    s.firstSrc = s.local + s.blocks.off(s.base) * es_;
    s.dst = out_ + off;
    s.avgDivisor = a_.op == collAvg ? comm_.nranks() : 0;
    s.scratchSlot = slot;
    return s;
  }

  RingTaskSpec gatherSpec(int seg) const {
    RingTaskSpec s = common(row_, local_);
    s.blocks = slices(seg);
    s.base = local_;
    s.steps = L_ - 1;
    s.dst = out_ + seg_.off(seg) * es_;
    s.firstSrc = s.dst + s.blocks.off(local_) * es_;
    return s;
  }

  Team& comm_;
  const OpArgs& a_;
  Progress pg_;
  size_t es_;
  int L_, H_, G_;
  int host_, local_;  // this rank's host and local index
  std::vector<int> row_, col_;
  const char* in_ = nullptr;
  char* out_ = nullptr;
  Blocks seg_;
  std::vector<Step> intraOps_;
  std::vector<bool> rsDone_, arDone_;
  size_t nextIntra_ = 0;
  int nextInter_ = 0;
  std::deque<Task> intra_, inter_;
};

// Gather to the leader, recursive doubling among leaders, scatter back.
void runLeaders(Team& comm, const OpArgs& a, const patterns::HierLayout& lay, int host) {
  const size_t es = typeSize(a.dtype), bytes = a.count * es;
  const std::vector<int>& row = lay.grid[host];
  const int leader = lay.leaders[host], L = static_cast<int>(row.size());
  char* out = static_cast<char*>(a.recvbuf);
  Progress pg(comm, "all-reduce (hier, leaders)");
  std::vector<Xfer> xs;
  if (comm.rank() != leader) {
    xs.resize(2);
    pg.send(leader, a.sendbuf, bytes, &xs[0]);
    pg.recv(leader, out, bytes, &xs[1]);
    waitXfers(pg, xs);
    return;
  }
  // Every local contribution lands in its own slot and is combined in local-index
  // order, whichever local rank leads.
  char* slots = static_cast<char*>(comm.scratch((L + 1) * bytes, kIntraSlot));
  xs.resize(L);
  for (int i = 0; i < L; ++i) {
    if (row[i] == leader) {
      memcpy(slots + i * bytes, a.sendbuf, bytes);
      xs[i].complete = true;
    } else {
      pg.recv(row[i], slots + i * bytes, bytes, &xs[i]);
    }
  }
  waitXfers(pg, xs);
  if (L == 1) memcpy(out, slots, bytes);
  else reduceBuffers(out, slots, slots + bytes, a.count, a.dtype, a.op);
  for (int i = 2; i < L; ++i) reduceBuffers(out, out, slots + i * bytes, a.count, a.dtype, a.op);
  int pos = 0;
  while (lay.leaders[pos] != leader) ++pos;
  groupRdAllReduce(pg, lay.leaders, pos, out, slots + L * bytes, a.count, a.dtype, a.op);
  if (a.op == collAvg) finishAverage(out, a.count, a.dtype, comm.nranks());
  xs.assign(L, Xfer{});
  for (int i = 0; i < L; ++i) {
    if (row[i] == leader) xs[i].complete = true;
    else pg.send(row[i], out, bytes, &xs[i]);
  }
  waitXfers(pg, xs);
}

class HierAllReduce final : public Algorithm {
 public:
  const char* name() const override { return "hier"; }
  const char* description() const override {
    return "intra-host reduce-scatter, a ring per local rank across hosts, intra-host all-gather";
  }
  OpKind kind() const override { return OpKind::AllReduce; }
  bool supports(const CostContext& c, const OpArgs&) const override { return c.job().nhosts() >= 2; }

  double estimate(const CostContext& c, size_t bytes) const override {
    if (c.nranks() <= 1) return std::numeric_limits<double>::infinity();
    return c.figures<HierModel>().bestUs(bytes);
  }

  void run(Team& comm, const OpArgs& a) const override {
    // The layout and the variant's costs are the communicator's (built once with its
    // cost context): rebuilding them per call showed in the small-message latency.
    const CostContext& cost = comm.costContext();
    const HierModel& hm = cost.figures<HierModel>();
    const patterns::HierLayout& lay = comm.layouts().hier;
    const int host = comm.topology().hostOf(comm.rank());
    const std::vector<int>& row = lay.grid[host];
    const int local = static_cast<int>(std::find(row.begin(), row.end(), comm.rank()) - row.begin());
    const size_t bytes = a.count * typeSize(a.dtype);
    // Rings need the same number of ranks on every host; otherwise leaders it is.
    if (hm.useLeaders(bytes)) {
      runLeaders(comm, a, lay, host);
      return;
    }
    HierRun(comm, a, lay, host, local, hierSegments(bytes, cost.params())).run();
  }
};

}  // namespace

const Algorithm& hierAllReduce() {
  static const HierAllReduce algo;
  return algo;
}

}  // namespace coll
