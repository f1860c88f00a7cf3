#include "algorithms/group_ops.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>

#include "base/reduce.hpp"
#include "base/types.hpp"
#include "algorithms/hier_cost.hpp"

namespace coll {

void waitXfers(Progress& pg, std::vector<Xfer>& xs) {
  pg.waitUntil([&] {
    for (const Xfer& x : xs)
      if (!x.complete) return false;
    return true;
  });
}

HierPlace hierPlace(const Team& comm) {
  HierPlace p;
  p.lay = &comm.layouts().hier;
  p.host = comm.topology().hostOf(comm.rank());
  const std::vector<int>& row = p.lay->grid[p.host];
  p.local = static_cast<int>(std::find(row.begin(), row.end(), comm.rank()) - row.begin());
  p.H = p.lay->nhosts();
  p.L = static_cast<int>(row.size());
  return p;
}

bool HierGridAlgorithm::supports(const CostContext& c, const OpArgs&) const {
  return c.job().nhosts() >= 2 && c.layouts().hier.uniform;
}

double HierGridAlgorithm::estimate(const CostContext& c, size_t bytes) const {
  if (c.nranks() <= 1) return std::numeric_limits<double>::infinity();
  return c.figures<HierModel>().gatherScatterUs(static_cast<double>(bytes), kind() == OpKind::ReduceScatter);
}

RingTaskSpec HierGrid::acrossHosts(int s, collDataType_t dt) const {
  RingTaskSpec r;
  r.members = place.lay->column(place.local);
  r.pos = place.host;
  r.blocks = Blocks::equal(seg.cnt(s));
  r.dt = dt;
  r.dst = columnOf(s, place.local);
  return r;
}

RingTaskSpec HierGrid::insideHost(int s, collDataType_t dt) const {
  RingTaskSpec r;
  r.members = place.row();
  r.pos = place.local;
  r.blocks = Blocks::equal(seg.cnt(s) * place.H);
  r.dt = dt;
  r.dst = region(s);
  return r;
}

HierGrid hierGrid(Team& comm, const OpArgs& a, int scratchSlot) {
  HierGrid g;
  g.place = hierPlace(comm);
  g.es = typeSize(a.dtype);
  const size_t n = static_cast<size_t>(g.place.H * g.place.L), bytes = a.count * g.es;
  g.segments = hierSegments(n * bytes, comm.costContext().params());
  g.seg = Blocks::split(a.count, g.segments);
  g.data = static_cast<char*>(comm.scratch(n * bytes, scratchSlot));
  return g;
}

void permuteGridBlocks(const patterns::HierLayout& lay, const char* src, char* dst, size_t stride, size_t offset,
                       size_t len, bool toGrid) {
  const size_t H = lay.grid.size();
  for (size_t h = 0; h < H; ++h)
    for (size_t i = 0; i < lay.grid[h].size(); ++i) {
      const size_t rankAt = static_cast<size_t>(lay.grid[h][i]) * stride + offset, gridAt = (i * H + h) * len;
      if (toGrid) memcpy(dst + gridAt, src + rankAt, len);
      else memcpy(dst + rankAt, src + gridAt, len);
    }
}

void runTwoPhasePipeline(Team& comm, Progress& pg, const TwoPhasePipeline& p) {
  struct Running {
    std::unique_ptr<RingTask> task;
    int seg;
  };
  std::deque<Running> phase[2];
  int next[2] = {0, 0}, finished = 0;
  std::vector<char> firstDone(static_cast<size_t>(p.segments), 0);
  auto canStart = [](const std::deque<Running>& q) { return q.empty() || (q.size() == 1 && q.back().task->allPosted()); };
  while (finished < p.segments) {
    bool acted = false;
    while (next[0] < p.segments && canStart(phase[0])) {
      const int s = next[0]++;
      if (p.beforeFirst) p.beforeFirst(s);
      phase[0].push_back({std::make_unique<RingTask>(comm, pg, p.first(s, s % 2)), s});
      acted = true;
    }
    while (next[1] < p.segments && firstDone[next[1]] && canStart(phase[1])) {
      const int s = next[1]++;
      phase[1].push_back({std::make_unique<RingTask>(comm, pg, p.second(s, s % 2)), s});
      acted = true;
    }
    for (auto& q : phase)
      for (Running& r : q) acted |= r.task->pump();
    acted |= pg.poll();
    while (!phase[0].empty() && phase[0].front().task->done()) {
      firstDone[phase[0].front().seg] = 1;
      phase[0].pop_front();
      acted = true;
    }
    while (!phase[1].empty() && phase[1].front().task->done()) {
      if (p.afterSecond) p.afterSecond(phase[1].front().seg);
      phase[1].pop_front();
      ++finished;
      acted = true;
    }
    if (acted) pg.progressed();
    else pg.idle();
  }
}

void runRingTask(Team& comm, Progress& pg, RingTaskSpec spec) {
  RingTask task(comm, pg, std::move(spec));
  while (!task.done()) {
    bool acted = task.pump();
    acted |= pg.poll();
    if (acted) pg.progressed();
    else pg.idle();
  }
}

void groupRdAllReduce(Progress& pg, const std::vector<int>& members, int pos, void* buf, void* tmp,
                      size_t count, collDataType_t dt, collRedOp_t op) {
  const int n = static_cast<int>(members.size());
  const size_t bytes = count * typeSize(dt);
  if (n <= 1 || bytes == 0) return;
  const int p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  std::vector<Xfer> xs(2);
  auto exchange = [&](int peerPos, bool send, bool recv) {
    xs.assign(2, Xfer{});
    if (recv) pg.recv(members[peerPos], tmp, bytes, &xs[0]);
    if (send) pg.send(members[peerPos], buf, bytes, &xs[1]);
    if (!recv) xs[0].complete = true;
    if (!send) xs[1].complete = true;
    waitXfers(pg, xs);
  };
  if (pos >= p2) {  // fold in, then wait for the result
    xs.assign(2, Xfer{});
    pg.send(members[pos - p2], buf, bytes, &xs[0]);
    pg.recv(members[pos - p2], buf, bytes, &xs[1]);
    waitXfers(pg, xs);
    return;
  }
  if (pos + p2 < n) {
    exchange(pos + p2, false, true);
    reduceBuffers(buf, buf, tmp, count, dt, op);
  }
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int partner = pos ^ mask;
    exchange(partner, true, true);
    if (pos < partner) reduceBuffers(buf, buf, tmp, count, dt, op);
    else reduceBuffers(buf, tmp, buf, count, dt, op);
  }
  if (pos + p2 < n) exchange(pos + p2, true, false);
}

}  // namespace coll
