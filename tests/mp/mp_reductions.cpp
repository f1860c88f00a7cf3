// All-reduce, reduce and reduce-scatter over every type, op, count and placement, each
// result compared bit for bit with the exact expected value.
#include <cstring>

#include "mp_pattern.hpp"

namespace mp {
namespace {

struct Case {
  collDataType_t dt;
  collRedOp_t op;
  size_t count;
  bool inPlace;
  uint32_t salt;  // the same on every rank: cases run in the same order everywhere
};

std::string describe(const Ctx& ctx, const char* coll, const Case& c, const std::string& extra = "") {
  return cat(coll, " ", typeName(c.dt), " ", opName(c.op), " count=", c.count,
             c.inPlace ? " in-place" : " out-of-place", extra, " (rank ", ctx.rank, " of ",
             ctx.nranks, ")");
}

void allReduceCase(Ctx& ctx, const Case& c) {
  ReducePattern pat(c.dt, c.op, ctx.nranks, c.salt);
  size_t bytes = c.count * collTypeSize(c.dt);
  auto send = buffer(c.count, c.dt, 0), recv = buffer(c.count, c.dt, 0xA5);
  auto want = buffer(c.count, c.dt, 0);
  pat.fillInput(send.data(), c.count, ctx.rank, 0);
  auto sendCopy = send;
  void* out = c.inPlace ? send.data() : recv.data();
  MP_CALL(ctx, collAllReduce(send.data(), out, c.count, c.dt, c.op, ctx.comm, nullptr));
  pat.fillExpected(want.data(), c.count, 0);
  std::string what = describe(ctx, "allreduce", c);
  expectEqual(what, want.data(), out, c.count, c.dt);
  if (!c.inPlace) expectEqual(what + ": send buffer changed", sendCopy.data(), send.data(), c.count, c.dt);
  // Exact values cannot differ between ranks unless they are wrong, which the line above
  // reports; the cross-rank comparison is done once per phase to save collectives.
  ctx.resultsFingerprint = ctx.resultsFingerprint * 0x100000001b3ull ^ fingerprint(out, bytes);
  ++ctx.checks;
}

void reduceCase(Ctx& ctx, const Case& c, int root) {
  ReducePattern pat(c.dt, c.op, ctx.nranks, c.salt);
  auto send = buffer(c.count, c.dt, 0), recv = buffer(c.count, c.dt, 0xA5);
  auto want = buffer(c.count, c.dt, 0);
  pat.fillInput(send.data(), c.count, ctx.rank, 0);
  auto sendCopy = send;
  void* out = c.inPlace ? send.data() : recv.data();
  MP_CALL(ctx, collReduce(send.data(), out, c.count, c.dt, c.op, root, ctx.comm, nullptr));
  std::string what = describe(ctx, "reduce", c, cat(" root=", root));
  if (ctx.rank == root) {
    pat.fillExpected(want.data(), c.count, 0);
    expectEqual(what, want.data(), out, c.count, c.dt);
    ++ctx.checks;
  }
  if (!c.inPlace) expectEqual(what + ": send buffer changed", sendCopy.data(), send.data(), c.count, c.dt);
}

// c.count is the per-rank (receive) count.
void reduceScatterCase(Ctx& ctx, const Case& c) {
  ReducePattern pat(c.dt, c.op, ctx.nranks, c.salt);
  size_t es = collTypeSize(c.dt), total = c.count * ctx.nranks;
  auto send = buffer(total, c.dt, 0), recv = buffer(c.count, c.dt, 0xA5);
  auto want = buffer(c.count, c.dt, 0);
  pat.fillInput(send.data(), total, ctx.rank, 0);
  auto sendCopy = send;
  void* out = c.inPlace ? send.data() + ctx.rank * c.count * es : recv.data();
  MP_CALL(ctx, collReduceScatter(send.data(), out, c.count, c.dt, c.op, ctx.comm, nullptr));
  pat.fillExpected(want.data(), c.count, ctx.rank * c.count);
  std::string what = describe(ctx, "reducescatter", c);
  expectEqual(what, want.data(), out, c.count, c.dt);
  if (!c.inPlace) expectEqual(what + ": send buffer changed", sendCopy.data(), send.data(), total, c.dt);
  ++ctx.checks;
}

}  // namespace

void runReductionTests(Ctx& ctx) {
  uint32_t serial = 0;
  unsigned rotation = 0;
  for (collDataType_t dt : kTypes) {
    for (collRedOp_t op : kOps) {
      ++rotation;
      for (size_t count : testCounts(ctx, dt, 1, rotation)) {
        for (bool inPlace : {false, true}) {
          ++serial;
          Case c{dt, op, count, inPlace, mix(serial, 1)};
          allReduceCase(ctx, c);
          reduceCase(ctx, c, static_cast<int>(serial % ctx.nranks));
        }
      }
      for (size_t count : testCounts(ctx, dt, ctx.nranks, rotation + 2))
        for (bool inPlace : {false, true})
          reduceScatterCase(ctx, Case{dt, op, count, inPlace, mix(++serial, 2)});
    }
  }
  expectSameOnAllRanks(ctx, "all-reduce results (fingerprint of all cases)", &ctx.resultsFingerprint,
                       sizeof ctx.resultsFingerprint);
}

}  // namespace mp
