#include "algorithms/group_ops.hpp"

#include <bit>

#include "core/reduce.hpp"
#include "core/types.hpp"

namespace coll {

void waitXfers(Progress& pg, std::vector<Xfer>& xs) {
  pg.waitUntil([&] {
    for (const Xfer& x : xs)
      if (!x.complete) return false;
    return true;
  });
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
