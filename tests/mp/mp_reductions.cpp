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

// Pre-multiplied sums (collRedOpCreatePreMulSum): rank r's scalar is kPreMul[r % 8], so
// the ranks' scalars differ; every product and sum stays exact in every type (integers
// wrap alike in the library and here, through 64 bits).
constexpr double kPreMul[8] = {2, -1, 1, 2, -1, 1, 2, -1};

// want[j] = sum over ranks of their input element (first + j) times their scalar.
void fillPreMulExpected(const Ctx& ctx, const ReducePattern& pat, collDataType_t dt, void* want, size_t count,
                        size_t first) {
  std::vector<int64_t> acc(count, 0);
  std::vector<double> facc(count, 0);
  auto in = buffer(count, dt, 0);
  for (int r = 0; r < ctx.nranks; ++r) {
    pat.fillInput(in.data(), count, r, first);
    for (size_t j = 0; j < count; ++j) {
      const double v = loadValue(in.data(), j, dt);
      facc[j] += v * kPreMul[r % 8];
      acc[j] = static_cast<int64_t>(static_cast<uint64_t>(acc[j]) +
                                    static_cast<uint64_t>(static_cast<int64_t>(v) * static_cast<int64_t>(kPreMul[r % 8])));
    }
  }
  for (size_t j = 0; j < count; ++j) storeValue(want, j, dt, isFloat(dt) ? facc[j] : static_cast<double>(acc[j]));
}

// All-reduce, reduce and reduce-scatter with this rank's pre-multiplied sum, in place or
// not; the send buffer must come back unchanged out of place.
void preMulCase(Ctx& ctx, collRedOp_t op, const Case& c, int root) {
  ReducePattern pat(c.dt, collSum, ctx.nranks, c.salt);
  const size_t es = collTypeSize(c.dt), total = c.count * ctx.nranks;
  const std::string what = cat("premulsum ", typeName(c.dt), " count=", c.count,
                               c.inPlace ? " in-place" : " out-of-place", " (rank ", ctx.rank, " of ", ctx.nranks, ")");
  auto send = buffer(total, c.dt, 0), recv = buffer(total, c.dt, 0xA5), want = buffer(total, c.dt, 0);
  pat.fillInput(send.data(), c.count, ctx.rank, 0);
  auto sendCopy = send;
  void* out = c.inPlace ? send.data() : recv.data();
  MP_CALL(ctx, collAllReduce(send.data(), out, c.count, c.dt, op, ctx.comm, nullptr));
  fillPreMulExpected(ctx, pat, c.dt, want.data(), c.count, 0);
  expectEqual("allreduce " + what, want.data(), out, c.count, c.dt);
  if (!c.inPlace) expectEqual("allreduce " + what + ": send buffer changed", sendCopy.data(), send.data(), c.count, c.dt);
  pat.fillInput(send.data(), c.count, ctx.rank, 0);
  MP_CALL(ctx, collReduce(send.data(), out, c.count, c.dt, op, root, ctx.comm, nullptr));
  if (ctx.rank == root) expectEqual(cat("reduce root=", root, " ", what), want.data(), out, c.count, c.dt);
  pat.fillInput(send.data(), total, ctx.rank, 0);
  sendCopy = send;
  out = c.inPlace ? send.data() + ctx.rank * c.count * es : recv.data();
  MP_CALL(ctx, collReduceScatter(send.data(), out, c.count, c.dt, op, ctx.comm, nullptr));
  fillPreMulExpected(ctx, pat, c.dt, want.data(), c.count, ctx.rank * c.count);
  expectEqual("reducescatter " + what, want.data(), out, c.count, c.dt);
  if (!c.inPlace) expectEqual("reducescatter " + what + ": send buffer changed", sendCopy.data(), send.data(), total, c.dt);
  ctx.checks += 3;
}

void runPreMulTests(Ctx& ctx, uint32_t serial) {
  unsigned rotation = 0;
  for (collDataType_t dt : kTypes) {
    auto scalar = buffer(1, dt, 0);
    storeValue(scalar.data(), 0, dt, kPreMul[ctx.rank % 8]);
    collRedOp_t op;
    MP_CALL(ctx, collRedOpCreatePreMulSum(&op, scalar.data(), dt, collScalarHostImmediate, ctx.comm));
    for (size_t count : testCounts(ctx, dt, ctx.nranks, ++rotation))
      for (bool inPlace : {false, true}) {
        ++serial;
        preMulCase(ctx, op, Case{dt, op, count, inPlace, mix(serial, 3)}, static_cast<int>(serial % ctx.nranks));
      }
    MP_CALL(ctx, collRedOpDestroy(op, ctx.comm));
  }
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
  // The bitwise ops on the integer types, at two counts (their kernels are the sums' loops).
  for (collDataType_t dt : kTypes) {
    if (isFloat(dt)) continue;
    for (collRedOp_t op : kBitwiseOps) {
      for (size_t count : {size_t{13}, size_t{1001}}) {
        Case c{dt, op, count, (++serial & 1) != 0, mix(serial, 3)};
        allReduceCase(ctx, c);
        reduceCase(ctx, c, static_cast<int>(serial % ctx.nranks));
        reduceScatterCase(ctx, Case{dt, op, count / 13, c.inPlace, mix(++serial, 4)});
      }
    }
  }
  expectSameOnAllRanks(ctx, "all-reduce results (fingerprint of all cases)", &ctx.resultsFingerprint,
                       sizeof ctx.resultsFingerprint);
  runPreMulTests(ctx, serial);
}

}  // namespace mp
