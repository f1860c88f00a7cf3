// Sends and receives: grouped so that pairs that would block each other cannot deadlock,
// and nonblocking.
#include <cstring>

#include "mp_pattern.hpp"

namespace mp {
namespace {

uint64_t tagOf(uint32_t salt, int from, int to) {
  return (static_cast<uint64_t>(salt) << 24) | (static_cast<uint64_t>(from) << 12) | static_cast<uint64_t>(to);
}

// Everyone sends to the right and receives from the left, in one group. Large enough
// counts would stall if the sends were issued blocking before the receives. In place,
// each rank sends a buffer and receives its replacement into it: the send carries the
// buffer as it was when the group ended, whichever of the two moves first (large counts
// go single-copy on shm, where the peer reads the buffer in place).
void ringCase(Ctx& ctx, collDataType_t dt, size_t count, uint32_t salt, bool inPlace = false) {
  int right = (ctx.rank + 1) % ctx.nranks, left = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
  auto send = buffer(count, dt, 0), recv = buffer(count, dt, 0xA5), want = buffer(count, dt, 0);
  auto& into = inPlace ? send : recv;
  fillPayload(send.data(), count, dt, tagOf(salt, ctx.rank, right));
  fillPayload(want.data(), count, dt, tagOf(salt, left, ctx.rank));
  MP_CALL(ctx, collGroupStart());
  MP_CALL(ctx, collSend(send.data(), count, dt, right, ctx.comm, nullptr));
  MP_CALL(ctx, collRecv(into.data(), count, dt, left, ctx.comm, nullptr));
  MP_CALL(ctx, collGroupEnd());
  expectEqual(cat("grouped ", inPlace ? "in-place " : "", "send/recv ring ", typeName(dt), " count=", count,
                  " from rank ", left, " (rank ", ctx.rank, " of ", ctx.nranks, ")"),
              want.data(), into.data(), count, dt);
  ++ctx.checks;
}

// Every rank sends a different block to every other rank, all in one group, receives
// posted before sends on even ranks and after them on odd ones.
void allPairsCase(Ctx& ctx, size_t count, uint32_t salt) {
  const collDataType_t dt = collInt32;
  size_t es = collTypeSize(dt);
  int n = ctx.nranks;
  auto send = buffer(count * n, dt, 0), recv = buffer(count * n, dt, 0xA5), want = buffer(count * n, dt, 0xA5);
  for (int p = 0; p < n; ++p) {
    if (p == ctx.rank) continue;
    fillPayload(send.data() + p * count * es, count, dt, tagOf(salt, ctx.rank, p));
    fillPayload(want.data() + p * count * es, count, dt, tagOf(salt, p, ctx.rank));
  }
  auto post = [&](bool sends) {
    for (int p = 0; p < n; ++p) {
      if (p == ctx.rank) continue;
      if (sends) MP_CALL(ctx, collSend(send.data() + p * count * es, count, dt, p, ctx.comm, nullptr));
      else MP_CALL(ctx, collRecv(recv.data() + p * count * es, count, dt, p, ctx.comm, nullptr));
    }
  };
  MP_CALL(ctx, collGroupStart());
  post(ctx.rank % 2 == 1);
  post(ctx.rank % 2 == 0);
  MP_CALL(ctx, collGroupEnd());
  expectEqual(cat("grouped send/recv all pairs int32 count=", count, " (rank ", ctx.rank, " of ", n, ")"),
              want.data(), recv.data(), count * n, dt);
  ++ctx.checks;
}

void nonblockingCase(Ctx& ctx, size_t count, uint32_t salt) {
  const collDataType_t dt = collFloat32;
  int right = (ctx.rank + 1) % ctx.nranks, left = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
  auto send = buffer(count, dt, 0), recv = buffer(count, dt, 0xA5), want = buffer(count, dt, 0);
  fillPayload(send.data(), count, dt, tagOf(salt, ctx.rank, right));
  fillPayload(want.data(), count, dt, tagOf(salt, left, ctx.rank));
  collRequest_t rq = nullptr, sq = nullptr;
  MP_CALL(ctx, collIrecv(recv.data(), count, dt, left, ctx.comm, &rq));
  MP_CALL(ctx, collIsend(send.data(), count, dt, right, ctx.comm, &sq));
  MP_CALL(ctx, collWait(&sq));
  MP_CALL(ctx, collWait(&rq));
  if (rq != nullptr || sq != nullptr) throw Failure("collWait left a request handle set");
  expectEqual(cat("isend/irecv float32 count=", count, " from rank ", left, " (rank ", ctx.rank,
                  " of ", ctx.nranks, ")"),
              want.data(), recv.data(), count, dt);
  ++ctx.checks;
}

}  // namespace

void runPointToPointTests(Ctx& ctx) {
  if (ctx.nranks < 2) return;
  uint32_t serial = 3000;
  unsigned rotation = 0;
  for (collDataType_t dt : {collInt8, collFloat16, collFloat32, collFloat64})
    for (size_t count : testCounts(ctx, dt, 1, ++rotation)) ringCase(ctx, dt, count, ++serial);
  for (size_t count : {size_t{1}, size_t{1001}, ctx.quick ? size_t{4099} : size_t{65537}})
    allPairsCase(ctx, count, ++serial);
  for (size_t count : testCounts(ctx, collFloat32, 1, ++rotation)) nonblockingCase(ctx, count, ++serial);
  for (size_t count : {size_t{1}, size_t{40000}, size_t{1} << 20}) ringCase(ctx, collFloat32, count, ++serial, true);
}

}  // namespace mp
