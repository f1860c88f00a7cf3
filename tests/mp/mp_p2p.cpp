// Sends and receives: grouped so that pairs that would block each other cannot deadlock,
// and nonblocking.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

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

// Uneven all-to-all: rank a sends (a + 2b) % 5 * unit elements to rank b (some parts
// empty), the parts laid out in reverse peer order with a gap of 3 elements before each,
// so that displacements do not follow counts. Blocking, nonblocking and in place, against
// the payload each sender fills its part with; the gaps must stay untouched.
void allToAllvCase(Ctx& ctx, collDataType_t dt, size_t unit, uint32_t salt, int mode) {
  const int n = ctx.nranks, me = ctx.rank;
  const size_t es = collTypeSize(dt);
  auto partCount = [&](int from, int to) { return static_cast<size_t>((from + 2 * to) % 5) * unit; };
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t sendTotal = 0, recvTotal = 0;
  for (int k = n - 1; k >= 0; --k) {
    sendTotal += 3;
    sd[k] = sendTotal;
    sc[k] = partCount(me, k);
    sendTotal += sc[k];
    recvTotal += 3;
    rd[k] = recvTotal;
    rc[k] = partCount(k, me);
    recvTotal += rc[k];
  }
  const bool inPlace = mode == 2;
  if (inPlace) {  // one layout for both: the receive parts must fit where the sends were
    for (int k = 0; k < n; ++k) rd[k] = sd[k], rc[k] = std::min(rc[k], sc[k]);
    recvTotal = sendTotal;
  }
  auto send = buffer(sendTotal, dt, 0x11), recv = buffer(recvTotal, dt, 0x5A), want = buffer(recvTotal, dt, 0x5A);
  for (int k = 0; k < n; ++k) fillPayload(send.data() + sd[k] * es, sc[k], dt, tagOf(salt, me, k));
  if (inPlace) {
    // Every rank must pass matching counts: in place, peers send min(their part, ours).
    for (int k = 0; k < n; ++k) sc[k] = std::min(partCount(me, k), partCount(k, me));
    for (int k = 0; k < n; ++k) rc[k] = sc[k];
    want = send;
    recv = send;
  }
  for (int k = 0; k < n; ++k) {
    std::vector<uint8_t> part(rc[k] * es + 1);
    fillPayload(part.data(), rc[k], dt, tagOf(salt, k, me));
    if (rc[k]) std::memcpy(want.data() + rd[k] * es, part.data(), rc[k] * es);
  }
  const void* from = inPlace ? recv.data() : send.data();
  if (mode == 1) {
    collRequest_t rq = nullptr;
    MP_CALL(ctx, collIallToAllv(from, sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), dt, ctx.comm, &rq));
    MP_CALL(ctx, collWait(&rq));
  } else {
    MP_CALL(ctx, collAllToAllv(from, sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), dt, ctx.comm, nullptr));
  }
  static const char* const kModes[] = {"blocking", "nonblocking", "in-place"};
  expectEqual(cat("all-to-allv (", kModes[mode], ") ", typeName(dt), " unit=", unit, " (rank ", me, " of ", n, ")"),
              want.data(), recv.data(), recvTotal, dt);
  ++ctx.checks;
}

// Bad arguments are refused on the calling rank before anything is sent.
void allToAllvErrorsCase(Ctx& ctx) {
  const int n = ctx.nranks;
  std::vector<size_t> zero(n, 0), c(n, 1), d(n, 0), huge(n, SIZE_MAX / 2);
  for (int k = 0; k < n; ++k) d[k] = k;
  std::vector<float> buf(n);
  auto expectInvalid = [&](collResult_t rc, const char* what) {
    if (rc != collInvalidArgument)
      throw Failure(cat("collAllToAllv with ", what, " returned ", collGetErrorString(rc),
                        ", not invalid argument"));
  };
  expectInvalid(collAllToAllv(buf.data(), nullptr, d.data(), buf.data(), c.data(), d.data(), collFloat32, ctx.comm,
                              nullptr), "NULL sendcounts");
  expectInvalid(collAllToAllv(buf.data(), huge.data(), d.data(), buf.data(), c.data(), d.data(), collFloat32,
                              ctx.comm, nullptr), "huge counts");
  expectInvalid(collAllToAllv(nullptr, c.data(), d.data(), buf.data(), c.data(), d.data(), collFloat32, ctx.comm,
                              nullptr), "NULL sendbuff");
  expectInvalid(collAllToAllv(buf.data(), c.data(), d.data(), buf.data() + 1, c.data(), d.data(), collFloat32,
                              ctx.comm, nullptr), "overlapping buffers");
  expectInvalid(collAllToAllv(buf.data(), c.data(), d.data(), buf.data(), zero.data(), d.data(), collFloat32,
                              ctx.comm, nullptr), "own send and receive counts that differ");
  expectInvalid(collAllToAllv(buf.data(), c.data(), d.data(), buf.data(), c.data(), d.data(),
                              static_cast<collDataType_t>(99), ctx.comm, nullptr), "a bad datatype");
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
  allToAllvErrorsCase(ctx);
  const size_t units[] = {1, 777, ctx.quick ? size_t{5000} : size_t{70000}};
  for (int mode = 0; mode < 3; ++mode)
    for (size_t u = 0; u < 3; ++u) {
      if (ctx.sample && u != (mode + rotation) % 3) continue;  // --sample: one unit per mode, in rotation
      for (collDataType_t dt : {collInt8, collFloat32, collFloat64}) allToAllvCase(ctx, dt, units[u], ++serial, mode);
    }
}

}  // namespace mp
