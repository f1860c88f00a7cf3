// Floating-point all-reduce of values whose sum depends on the order of additions: every
// rank must still end with the same bits, and running it again must give those bits again.
// The exact-integer tests cannot see this (any order gives the same exact sum).
#include <cmath>
#include <cstring>

#include "mp_pattern.hpp"

namespace mp {
namespace {

// Rank r's input: uniform in [-1, 1), rounded to the type.
void fillRandom(void* buf, size_t count, collDataType_t dt, int rank, uint32_t salt) {
  for (size_t k = 0; k < count; ++k) {
    double u = mix(static_cast<uint64_t>(rank) << 40 | k, salt) / 4294967296.0;
    storeValue(buf, k, dt, 2 * u - 1);
  }
}

// Bound on the rounding error of a sum of n values in [-1, 1): n roundings of a partial
// sum of magnitude at most n, each by at most one unit in the last place.
double tolerance(collDataType_t dt, int n) {
  double eps = dt == collFloat16 ? 0x1p-10 : dt == collBfloat16 ? 0x1p-7
             : dt == collFloat32 ? 0x1p-23 : 0x1p-52;
  return n * n * eps;
}

void agreementCase(Ctx& ctx, collDataType_t dt, collRedOp_t op, size_t count, uint32_t salt) {
  size_t es = collTypeSize(dt);
  auto send = buffer(count, dt, 0), first = buffer(count, dt, 0xA5), again = buffer(count, dt, 0x5A);
  fillRandom(send.data(), count, dt, ctx.rank, salt);
  MP_CALL(ctx, collAllReduce(send.data(), first.data(), count, dt, op, ctx.comm, nullptr));
  MP_CALL(ctx, collAllReduce(send.data(), again.data(), count, dt, op, ctx.comm, nullptr));
  std::string what = cat("allreduce ", typeName(dt), " ", opName(op), " of random floats count=",
                         count, " (rank ", ctx.rank, " of ", ctx.nranks, ")");
  expectEqual(what + ", run twice", first.data(), again.data(), count, dt);
  expectSameOnAllRanks(ctx, what, first.data(), count * es);

  // Compare with a double-precision sum of the same rounded inputs.
  std::vector<double> ref(count, 0.0);
  auto other = buffer(count, dt, 0);
  for (int r = 0; r < ctx.nranks; ++r) {
    fillRandom(other.data(), count, dt, r, salt);
    for (size_t k = 0; k < count; ++k) ref[k] += loadValue(other.data(), k, dt);
  }
  double tol = tolerance(dt, ctx.nranks);
  for (size_t k = 0; k < count; ++k) {
    double want = op == collAvg ? ref[k] / ctx.nranks : ref[k];
    double got = loadValue(first.data(), k, dt);
    if (!(std::fabs(got - want) <= tol))
      throw Failure(cat("MISMATCH ", what, ": element ", k, " is ", got, ", expected ", want,
                        " within ", tol));
  }
  ++ctx.checks;
}

}  // namespace

void runFloatAgreementTests(Ctx& ctx) {
  uint32_t serial = 1000;
  unsigned rotation = 1;  // count 0 and 1 say little here: start sampling at 13
  for (collDataType_t dt : {collFloat16, collBfloat16, collFloat32, collFloat64})
    for (collRedOp_t op : {collSum, collAvg})
      for (size_t count : testCounts(ctx, dt, 1, ++rotation))
        agreementCase(ctx, dt, op, count, mix(++serial, 3));
}

}  // namespace mp
