// Broadcast, all-gather, all-to-all, gather and scatter: every block must arrive at the
// right offset.
// Each payload is tagged with who sent it (and to whom), so a block landing in the
// wrong place shows up as a mismatch.
#include <cstring>

#include "mp_pattern.hpp"

namespace mp {
namespace {

uint64_t tagOf(uint32_t salt, int from, int to) {
  return (static_cast<uint64_t>(salt) << 24) | (static_cast<uint64_t>(from) << 12) | static_cast<uint64_t>(to);
}

std::string describe(const Ctx& ctx, const char* coll, collDataType_t dt, size_t count,
                     bool inPlace, const std::string& extra = "") {
  return cat(coll, " ", typeName(dt), " count=", count, inPlace ? " in-place" : " out-of-place",
             extra, " (rank ", ctx.rank, " of ", ctx.nranks, ")");
}

void broadcastCase(Ctx& ctx, collDataType_t dt, size_t count, bool inPlace, int root, uint32_t salt) {
  auto send = buffer(count, dt, 0), recv = buffer(count, dt, 0xA5), want = buffer(count, dt, 0);
  fillPayload(want.data(), count, dt, tagOf(salt, root, 0));
  if (ctx.rank == root) std::memcpy(send.data(), want.data(), want.size());
  auto sendCopy = send;
  void* out = inPlace ? send.data() : recv.data();
  MP_CALL(ctx, collBroadcast(send.data(), out, count, dt, root, ctx.comm, nullptr));
  std::string what = describe(ctx, "broadcast", dt, count, inPlace, cat(" root=", root));
  expectEqual(what, want.data(), out, count, dt);
  if (!inPlace) expectEqual(what + ": send buffer changed", sendCopy.data(), send.data(), count, dt);
  ++ctx.checks;
}

void allGatherCase(Ctx& ctx, collDataType_t dt, size_t count, bool inPlace, uint32_t salt) {
  size_t es = collTypeSize(dt), total = count * ctx.nranks;
  auto send = buffer(count, dt, 0), recv = buffer(total, dt, 0xA5), want = buffer(total, dt, 0);
  for (int r = 0; r < ctx.nranks; ++r)
    fillPayload(want.data() + r * count * es, count, dt, tagOf(salt, r, 0));
  fillPayload(send.data(), count, dt, tagOf(salt, ctx.rank, 0));
  const void* in = send.data();
  if (inPlace) {
    std::memcpy(recv.data() + ctx.rank * count * es, send.data(), count * es);
    in = recv.data() + ctx.rank * count * es;
  }
  MP_CALL(ctx, collAllGather(in, recv.data(), count, dt, ctx.comm, nullptr));
  expectEqual(describe(ctx, "allgather", dt, count, inPlace), want.data(), recv.data(), total, dt);
  ++ctx.checks;
}

void allToAllCase(Ctx& ctx, collDataType_t dt, size_t count, uint32_t salt) {
  size_t es = collTypeSize(dt), total = count * ctx.nranks;
  auto send = buffer(total, dt, 0), recv = buffer(total, dt, 0xA5), want = buffer(total, dt, 0);
  for (int r = 0; r < ctx.nranks; ++r) {
    fillPayload(send.data() + r * count * es, count, dt, tagOf(salt, ctx.rank, r));
    fillPayload(want.data() + r * count * es, count, dt, tagOf(salt, r, ctx.rank));
  }
  MP_CALL(ctx, collAllToAll(send.data(), recv.data(), count, dt, ctx.comm, nullptr));
  expectEqual(describe(ctx, "alltoall", dt, count, false), want.data(), recv.data(), total, dt);
  ++ctx.checks;
}

// Gather to `root`: the other ranks pass NULL for the receive buffer only the root uses.
void gatherCase(Ctx& ctx, collDataType_t dt, size_t count, bool inPlace, int root, uint32_t salt) {
  size_t es = collTypeSize(dt), total = count * ctx.nranks;
  const bool isRoot = ctx.rank == root;
  auto send = buffer(count, dt, 0), recv = buffer(total, dt, 0xA5), want = buffer(total, dt, 0);
  for (int r = 0; r < ctx.nranks; ++r) fillPayload(want.data() + r * count * es, count, dt, tagOf(salt, r, root));
  fillPayload(send.data(), count, dt, tagOf(salt, ctx.rank, root));
  const void* in = send.data();
  if (inPlace && isRoot) {
    std::memcpy(recv.data() + ctx.rank * count * es, send.data(), count * es);
    in = recv.data() + ctx.rank * count * es;
  }
  MP_CALL(ctx, collGather(in, isRoot ? recv.data() : nullptr, count, dt, root, ctx.comm, nullptr));
  if (isRoot) expectEqual(describe(ctx, "gather", dt, count, inPlace, cat(" root=", root)), want.data(), recv.data(), total, dt);
  ++ctx.checks;
}

// Scatter from `root`: the other ranks pass NULL for the send buffer only the root uses.
void scatterCase(Ctx& ctx, collDataType_t dt, size_t count, bool inPlace, int root, uint32_t salt) {
  size_t es = collTypeSize(dt), total = count * ctx.nranks;
  const bool isRoot = ctx.rank == root;
  auto send = buffer(total, dt, 0), recv = buffer(count, dt, 0xA5), want = buffer(count, dt, 0);
  for (int r = 0; isRoot && r < ctx.nranks; ++r) fillPayload(send.data() + r * count * es, count, dt, tagOf(salt, root, r));
  fillPayload(want.data(), count, dt, tagOf(salt, root, ctx.rank));
  void* out = inPlace && isRoot ? send.data() + ctx.rank * count * es : recv.data();
  MP_CALL(ctx, collScatter(isRoot ? send.data() : nullptr, out, count, dt, root, ctx.comm, nullptr));
  expectEqual(describe(ctx, "scatter", dt, count, inPlace, cat(" root=", root)), want.data(), out, count, dt);
  ++ctx.checks;
}

}  // namespace

void runMovementTests(Ctx& ctx) {
  uint32_t serial = 2000;
  unsigned rotation = 0;
  for (collDataType_t dt : kTypes) {
    ++rotation;
    for (size_t count : testCounts(ctx, dt, 1, rotation))
      for (bool inPlace : {false, true}) {
        ++serial;
        broadcastCase(ctx, dt, count, inPlace, static_cast<int>(serial % ctx.nranks), serial);
      }
    for (size_t count : testCounts(ctx, dt, ctx.nranks, rotation + 2)) {
      for (bool inPlace : {false, true}) allGatherCase(ctx, dt, count, inPlace, ++serial);
      allToAllCase(ctx, dt, count, ++serial);
      for (bool inPlace : {false, true}) {
        ++serial;
        gatherCase(ctx, dt, count, inPlace, static_cast<int>(serial % ctx.nranks), serial);
        scatterCase(ctx, dt, count, inPlace, static_cast<int>((serial + 1) % ctx.nranks), serial);
      }
    }
  }
}

}  // namespace mp
