#include "algorithms/group_ops.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/reduce.hpp"
#include "core/types.hpp"
#include "tuning/cost_model.hpp"

namespace coll {

void waitXfers(Progress& pg, std::vector<Xfer>& xs) {
  pg.waitUntil([&] {
    for (const Xfer& x : xs)
      if (!x.complete) return false;
    return true;
  });
}

HierPlace hierPlace(const Comm& comm) {
  HierPlace p;
  p.lay = &comm.costModel().hier().layout();
  p.host = comm.topology().hostOf(comm.rank());
  const std::vector<int>& row = p.lay->grid[p.host];
  p.local = static_cast<int>(std::find(row.begin(), row.end(), comm.rank()) - row.begin());
  p.H = p.lay->nhosts();
  p.L = static_cast<int>(row.size());
  return p;
}

bool hierGridUsable(const Comm& comm) {
  return comm.topology().nhosts() >= 2 && comm.costModel().hier().uniform();
}

HierGrid hierGrid(Comm& comm, const OpArgs& a, int scratchSlot) {
  HierGrid g;
  g.place = hierPlace(comm);
  g.blk = a.count * typeSize(a.dtype);
  g.column = g.place.H * g.blk;
  g.data = static_cast<char*>(comm.scratch(g.place.L * g.column, scratchSlot));
  return g;
}

void permuteGridBlocks(const patterns::HierLayout& lay, const char* src, char* dst, size_t bytes, bool toGrid) {
  const size_t H = lay.grid.size();
  for (size_t h = 0; h < H; ++h)
    for (size_t i = 0; i < lay.grid[h].size(); ++i) {
      const size_t rankAt = static_cast<size_t>(lay.grid[h][i]) * bytes, gridAt = (i * H + h) * bytes;
      if (toGrid) memcpy(dst + gridAt, src + rankAt, bytes);
      else memcpy(dst + rankAt, src + gridAt, bytes);
    }
}

void runRingTask(Comm& comm, Progress& pg, RingTaskSpec spec) {
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
