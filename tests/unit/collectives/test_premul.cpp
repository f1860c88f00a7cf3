// Pre-multiplied sums (collRedOpCreatePreMulSum): every rank scales its input by its own
// scalar, then the products are summed. Values against an exact reference for every data
// type, nranks 1..8, in place and out of place, blocking, nonblocking and grouped, on
// every transport and with every reducing algorithm forced; then every error.
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "harness.hpp"
#include "reference.hpp"

using namespace testing_coll;

namespace {

bool mentions(const std::string& text, const std::string& word) { return text.find(word) != std::string::npos; }

// Rank r's scalar: ranks differ, and signs and a fraction (floats) are in the mix. Every
// product and partial sum of the inputs in [-4, 4] stays exact, even in bfloat16.
double scalarOf(int r, collDataType_t dt) {
  static const double f[8] = {2, -1, 3, 0.5, -2, 1, -3, 4};
  static const double i[8] = {2, -1, 3, 5, -2, 1, -3, 4};
  return isFloat(dt) ? f[r % 8] : i[r % 8];
}

// Element `at` of sum over ranks r of value(r, at) * scalarOf(r), stored in type dt.
// Integers wrap: computed in 64 bits and cut to the type's width when stored, which the
// type's own modular products and sums agree with.
void expectedPreMul(void* out, size_t at, collDataType_t dt, uint32_t seed, int n) {
  int64_t acc = 0;
  double facc = 0;
  for (int r = 0; r < n; ++r) {
    const int64_t v = smallValue(seed, r, at, collSum);
    facc += static_cast<double>(v) * scalarOf(r, dt);
    acc = static_cast<int64_t>(static_cast<uint64_t>(acc) +
                               static_cast<uint64_t>(v) * static_cast<uint64_t>(static_cast<int64_t>(scalarOf(r, dt))));
  }
  storeValue(out, 0, dt, isFloat(dt) ? facc : static_cast<double>(acc));
}

void fill(std::vector<char>& buf, size_t count, collDataType_t dt, uint32_t seed, int rank) {
  for (size_t i = 0; i < count; ++i) storeValue(buf.data(), i, dt, static_cast<double>(smallValue(seed, rank, i, collSum)));
}

// Checks `count` elements of got, the reduction of elements [first, first + count).
void check(Failures& f, const std::string& what, const void* got, size_t first, size_t count, collDataType_t dt,
           uint32_t seed, int n) {
  const size_t es = collTypeSize(dt);
  for (size_t i = 0; i < count; ++i) {
    char want[8];
    expectedPreMul(want, first + i, dt, seed, n);
    if (memcmp(static_cast<const char*>(got) + i * es, want, es) != 0) {
      f.add(what + ": element " + std::to_string(first + i) + " is " + std::to_string(loadValue(got, i, dt)) +
            ", expected " + std::to_string(loadValue(want, 0, dt)));
      return;
    }
  }
}

// Each rank's op per data type, made with that rank's scalar.
std::vector<collRedOp_t> makeOps(int r, collComm_t c) {
  std::vector<collRedOp_t> ops;
  for (collDataType_t dt : kTypes) {
    char s[8];
    storeValue(s, 0, dt, scalarOf(r, dt));
    collRedOp_t op = collSum;
    EXPECT_EQ(collRedOpCreatePreMulSum(&op, s, dt, collScalarHostImmediate, c), collSuccess) << collGetLastError(c);
    EXPECT_GE(static_cast<int>(op), static_cast<int>(collNumOps));
    ops.push_back(op);
  }
  return ops;
}

enum Mode { kBlocking, kNonblocking, kGrouped };
const char* modeName(int m) { return m == kBlocking ? "blocking" : m == kNonblocking ? "nonblocking" : "grouped"; }

// One round of all-reduce, reduce and reduce-scatter with a pre-multiplied sum on every
// rank, issued in `mode`, checked against the reference; out-of-place inputs must come
// back untouched.
void round(Failures& f, int r, int n, collComm_t c, collDataType_t dt, collRedOp_t op, size_t count, bool inPlace,
           int mode, uint32_t seed) {
  const size_t es = collTypeSize(dt);
  const std::string what = std::string(modeName(mode)) + " n=" + std::to_string(n) + " rank=" + std::to_string(r) +
                           " type=" + std::to_string(dt) + " count=" + std::to_string(count) +
                           (inPlace ? " in-place" : " out-of-place");
  const int root = static_cast<int>((count + mode) % n);
  std::vector<char> arIn(count * es), arOut(count * es), rIn(count * es), rOut(count * es);
  std::vector<char> rsIn(count * n * es), rsOut(count * es);
  fill(arIn, count, dt, seed, r);
  fill(rIn, count, dt, seed + 1, r);
  fill(rsIn, count * n, dt, seed + 2, r);
  const std::vector<char> arKeep = arIn, rKeep = rIn, rsKeep = rsIn;
  void* arDst = inPlace ? arIn.data() : arOut.data();
  void* rDst = inPlace ? rIn.data() : rOut.data();
  void* rsDst = inPlace ? rsIn.data() + r * count * es : rsOut.data();
  collResult_t rc[3] = {collSuccess, collSuccess, collSuccess};
  if (mode == kNonblocking) {
    collRequest_t req[3] = {nullptr, nullptr, nullptr};
    rc[0] = collIallReduce(arIn.data(), arDst, count, dt, op, c, &req[0]);
    rc[1] = collIreduce(rIn.data(), rDst, count, dt, op, root, c, &req[1]);
    rc[2] = collIreduceScatter(rsIn.data(), rsDst, count, dt, op, c, &req[2]);
    for (int k = 0; k < 3; ++k)
      if (rc[k] == collSuccess) rc[k] = collWait(&req[k]);
  } else {
    if (mode == kGrouped) collGroupStart();
    rc[0] = collAllReduce(arIn.data(), arDst, count, dt, op, c, nullptr);
    rc[1] = collReduce(rIn.data(), rDst, count, dt, op, root, c, nullptr);
    rc[2] = collReduceScatter(rsIn.data(), rsDst, count, dt, op, c, nullptr);
    if (mode == kGrouped && collGroupEnd() != collSuccess) rc[0] = collInternalError;
  }
  for (collResult_t x : rc)
    if (x != collSuccess) return f.add(what + ": " + collGetLastError(c));
  check(f, "allreduce " + what, arDst, 0, count, dt, seed, n);
  if (r == root) check(f, "reduce " + what, rDst, 0, count, dt, seed + 1, n);
  check(f, "reducescatter " + what, rsDst, r * count, count, dt, seed + 2, n);
  if (!inPlace && (arIn != arKeep || rIn != rKeep || rsIn != rsKeep)) f.add(what + ": the send buffer was written");
  // Out of place, a reduce's non-root keeps even its (unused) buffer; in place too.
  if (inPlace && r != root && rIn != rKeep) f.add(what + ": a non-root's reduce buffer was written");
}

class PreMul : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(PreMul, EveryTypeAndCall) {
  const int n = std::get<1>(GetParam());
  Job job(n, {{"COLL_TRANSPORT", std::get<0>(GetParam())}});
  ASSERT_TRUE(job.ok());
  Failures fails;
  job.run([&](int r, collComm_t c) {
    const std::vector<collRedOp_t> ops = makeOps(r, c);
    uint32_t seed = 7;
    for (size_t t = 0; t < ops.size(); ++t)
      for (size_t count : {size_t(1), size_t(7), static_cast<size_t>(13 * n + 5), size_t(1031)})
        for (int inPlace = 0; inPlace < 2; ++inPlace)
          for (int mode : {kBlocking, kNonblocking, kGrouped}) {
            seed += 3;
            round(fails, r, n, c, kTypes[t], ops[t], count, inPlace, mode, seed);
          }
    for (collRedOp_t op : ops) EXPECT_EQ(collRedOpDestroy(op, c), collSuccess) << collGetLastError(c);
  });
  EXPECT_EQ(fails.count, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, PreMul,
                         ::testing::Combine(::testing::Values("tcp", "shm", "auto"),
                                            ::testing::Values(1, 2, 3, 4, 5, 7, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(Net, PreMul, ::testing::Combine(::testing::Values("net"), ::testing::Values(2, 3, 5, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param));
                         });

// Every algorithm of the three reducing collectives, forced (COLL_ALGO): six settings
// cover the six all-reduces, the two reduces and the three reduce-scatters. Counts reach
// past a chunk so that the pipelined algorithms run several steps.
TEST(PreMulAlgorithms, EachForced) {
  const char* allreduce[] = {"ring", "rd", "oneshot", "hd", "tree", "hier"};
  const char* reduce[] = {"chain", "tree"};
  const char* reducescatter[] = {"ring", "hd", "hier"};
  for (int k = 0; k < 6; ++k) {
    const std::string algo = std::string("allreduce:") + allreduce[k] + ",reduce:" + reduce[k % 2] +
                             ",reducescatter:" + reducescatter[k % 3];
    for (int n : {3, 4, 6}) {
      SCOPED_TRACE(algo + " n=" + std::to_string(n));
      Job job(n, {{"COLL_ALGO", algo}});
      ASSERT_TRUE(job.ok());
      Failures fails;
      job.run([&](int r, collComm_t c) {
        const std::vector<collRedOp_t> ops = makeOps(r, c);
        uint32_t seed = 100;
        for (size_t t : {size_t(1), size_t(6), size_t(7), size_t(8)})  // uint8, half, bfloat16, float
          for (size_t count : {size_t(1), size_t(5), size_t(4099), size_t(70001)})
            for (int inPlace = 0; inPlace < 2; ++inPlace) {
              seed += 3;
              round(fails, r, n, c, kTypes[t], ops[t], count, inPlace, kBlocking, seed);
            }
        for (collRedOp_t op : ops) collRedOpDestroy(op, c);
      });
      EXPECT_EQ(fails.count, 0);
    }
  }
}

// A nonblocking call, or a group, keeps the scalar it was issued with: destroying the op
// while the call is pending neither fails it nor changes its result.
TEST(PreMulLifetime, DestroyWhileInFlight) {
  const int n = 3;
  Job job(n);
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    const size_t count = 300000;
    std::vector<float> in(count, 1.0f), out(count, 0.0f);
    float s = static_cast<float>(r + 1);
    collRedOp_t op;
    ASSERT_EQ(collRedOpCreatePreMulSum(&op, &s, collFloat32, collScalarHostImmediate, c), collSuccess);
    s = 100;  // read at creation: later changes do not count
    collRequest_t req = nullptr;
    ASSERT_EQ(collIallReduce(in.data(), out.data(), count, collFloat32, op, c, &req), collSuccess);
    ASSERT_EQ(collRedOpDestroy(op, c), collSuccess) << collGetLastError(c);
    ASSERT_EQ(collWait(&req), collSuccess) << collGetLastError(c);
    EXPECT_EQ(out[0], 6.0f);
    EXPECT_EQ(out[count - 1], 6.0f);
    // Destroyed inside the group, before the group runs.
    ASSERT_EQ(collRedOpCreatePreMulSum(&op, &s, collFloat32, collScalarHostImmediate, c), collSuccess);
    ASSERT_EQ(collGroupStart(), collSuccess);
    ASSERT_EQ(collAllReduce(in.data(), out.data(), count, collFloat32, op, c, nullptr), collSuccess);
    ASSERT_EQ(collRedOpDestroy(op, c), collSuccess);
    ASSERT_EQ(collGroupEnd(), collSuccess) << collGetLastError(c);
    EXPECT_EQ(out[7], 300.0f);
    EXPECT_EQ(collAllReduce(in.data(), out.data(), count, collFloat32, op, c, nullptr), collInvalidUsage);
  });
}

// Every way to get an op wrong, with its code and message; none of them harms the
// communicator.
TEST(PreMulErrors, CreateArguments) {
  Job job(1);
  ASSERT_TRUE(job.ok());
  collComm_t c = job.comm(0);
  collRedOp_t op = collSum;
  double s = 2;
  EXPECT_EQ(collRedOpCreatePreMulSum(nullptr, &s, collFloat64, collScalarHostImmediate, c), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c), "collRedOpCreatePreMulSum: op is NULL")) << collGetLastError(c);
  EXPECT_EQ(collRedOpCreatePreMulSum(&op, nullptr, collFloat64, collScalarHostImmediate, c), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c), "scalar is NULL")) << collGetLastError(c);
  EXPECT_EQ(collRedOpCreatePreMulSum(&op, &s, collNumTypes, collScalarHostImmediate, c), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c), "datatype 12 is not a valid collDataType_t")) << collGetLastError(c);
  EXPECT_EQ(collRedOpCreatePreMulSum(&op, &s, static_cast<collDataType_t>(-1), collScalarHostImmediate, c),
            collInvalidArgument);
  EXPECT_EQ(collRedOpCreatePreMulSum(&op, &s, collFloat64, static_cast<collScalarResidence_t>(7), c),
            collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c), "residence 7 is not a valid collScalarResidence_t")) << collGetLastError(c);
  EXPECT_EQ(collRedOpCreatePreMulSum(&op, &s, collFloat64, collScalarDevice, c), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(c), "collScalarDevice is not supported")) << collGetLastError(c);
  EXPECT_EQ(collRedOpCreatePreMulSum(&op, &s, collFloat64, collScalarHostImmediate, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(nullptr), "collRedOpCreatePreMulSum: comm is NULL")) << collGetLastError(nullptr);
  EXPECT_EQ(collRedOpDestroy(op, nullptr), collInvalidArgument);
  EXPECT_EQ(op, collSum) << "a failed call must not hand out an op";
  // Still usable.
  double in = 3, out = 0;
  ASSERT_EQ(collRedOpCreatePreMulSum(&op, &s, collFloat64, collScalarHostImmediate, c), collSuccess);
  ASSERT_EQ(collAllReduce(&in, &out, 1, collFloat64, op, c, nullptr), collSuccess) << collGetLastError(c);
  EXPECT_EQ(out, 6.0);
  EXPECT_EQ(collRedOpDestroy(op, c), collSuccess);
}

TEST(PreMulErrors, WrongOpWrongTypeWrongComm) {
  Job a(1), b(1);
  ASSERT_TRUE(a.ok() && b.ok());
  collComm_t c = a.comm(0), other = b.comm(0);
  float s = 2, in[4] = {1, 2, 3, 4}, out[4] = {};
  int32_t iin[4] = {}, iout[4] = {};
  collRedOp_t op;
  ASSERT_EQ(collRedOpCreatePreMulSum(&op, &s, collFloat32, collScalarHostImmediate, c), collSuccess);
  // With another data type, in every reducing call.
  EXPECT_EQ(collAllReduce(iin, iout, 4, collInt32, op, c, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c), "collAllReduce: op " + std::to_string(op) +
                                                " was made for datatype float, but the call passes int32"))
      << collGetLastError(c);
  EXPECT_EQ(collReduce(iin, iout, 4, collInt32, op, 0, c, nullptr), collInvalidArgument);
  collRequest_t req = nullptr;
  EXPECT_EQ(collIreduceScatter(iin, iout, 4, collInt32, op, c, &req), collInvalidArgument);
  EXPECT_EQ(req, nullptr);
  // On another communicator: in a call, and to destroy it.
  EXPECT_EQ(collAllReduce(in, out, 4, collFloat32, op, other, nullptr), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(other), "belongs to another communicator")) << collGetLastError(other);
  EXPECT_EQ(collRedOpDestroy(op, other), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(other), "collRedOpDestroy: op " + std::to_string(op) +
                                                    " belongs to another communicator"))
      << collGetLastError(other);
  // Built-in and never-made ops cannot be destroyed.
  EXPECT_EQ(collRedOpDestroy(collSum, c), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c), "op 0 (sum) is a built-in reduction operator")) << collGetLastError(c);
  EXPECT_EQ(collRedOpDestroy(static_cast<collRedOp_t>(1 << 30), c), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c), "is neither a built-in collRedOp_t nor one made by")) << collGetLastError(c);
  EXPECT_EQ(collAllReduce(in, out, 4, collFloat32, static_cast<collRedOp_t>(1 << 30), c, nullptr),
            collInvalidArgument);
  EXPECT_EQ(collAllReduce(in, out, 4, collFloat32, static_cast<collRedOp_t>(-1), c, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c), "op -1 is not a valid collRedOp_t")) << collGetLastError(c);
  // Non-reducing calls ignore the op argument they do not have; the op works where it belongs.
  ASSERT_EQ(collAllReduce(in, out, 4, collFloat32, op, c, nullptr), collSuccess) << collGetLastError(c);
  EXPECT_EQ(out[3], 8.0f);
  // Destroyed: once is fine, twice is refused, and so is every use after.
  EXPECT_EQ(collRedOpDestroy(op, c), collSuccess);
  EXPECT_EQ(collRedOpDestroy(op, c), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(c), "op " + std::to_string(op) + " was destroyed")) << collGetLastError(c);
  EXPECT_EQ(collAllReduce(in, out, 4, collFloat32, op, c, nullptr), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(c), "was destroyed")) << collGetLastError(c);
  EXPECT_EQ(collIallReduce(in, out, 4, collFloat32, op, c, &req), collInvalidUsage);
  // Numbers are not reused: the next op gets a new one.
  collRedOp_t next;
  ASSERT_EQ(collRedOpCreatePreMulSum(&next, &s, collFloat32, collScalarHostImmediate, c), collSuccess);
  EXPECT_GT(next, op);
  EXPECT_EQ(collRedOpDestroy(next, c), collSuccess);
}

TEST(PreMulErrors, TooManyOps) {
  Job job(1);
  ASSERT_TRUE(job.ok());
  collComm_t c = job.comm(0);
  int32_t s = 3;
  std::vector<collRedOp_t> ops(1024);
  for (auto& op : ops) ASSERT_EQ(collRedOpCreatePreMulSum(&op, &s, collInt32, collScalarHostImmediate, c), collSuccess);
  collRedOp_t extra;
  EXPECT_EQ(collRedOpCreatePreMulSum(&extra, &s, collInt32, collScalarHostImmediate, c), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(c), "already holds 1024 reduction operators")) << collGetLastError(c);
  // Another communicator has its own allowance.
  Job other(1);
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(collRedOpCreatePreMulSum(&extra, &s, collInt32, collScalarHostImmediate, other.comm(0)), collSuccess);
  // Destroying one makes room again; every op still works.
  ASSERT_EQ(collRedOpDestroy(ops[0], c), collSuccess);
  ASSERT_EQ(collRedOpCreatePreMulSum(&ops[0], &s, collInt32, collScalarHostImmediate, c), collSuccess);
  int32_t in = 5, out = 0;
  ASSERT_EQ(collAllReduce(&in, &out, 1, collInt32, ops[1023], c, nullptr), collSuccess);
  EXPECT_EQ(out, 15);
  for (auto op : ops) ASSERT_EQ(collRedOpDestroy(op, c), collSuccess);
}

// Ops die with their communicator; the handle of a destroyed communicator is refused.
TEST(PreMulErrors, UseAfterCommDestroy) {
  collRedOp_t op;
  {
    Job job(1);
    ASSERT_TRUE(job.ok());
    collComm_t c = job.comm(0);
    float s = 2;
    ASSERT_EQ(collRedOpCreatePreMulSum(&op, &s, collFloat32, collScalarHostImmediate, c), collSuccess);
    ASSERT_EQ(collCommDestroy(c), collSuccess);
    job.forget(0);
    EXPECT_EQ(collRedOpDestroy(op, c), collInvalidUsage);
    EXPECT_TRUE(mentions(collGetLastError(nullptr), "collRedOpDestroy: comm is not a live communicator"))
        << collGetLastError(nullptr);
    EXPECT_EQ(collRedOpCreatePreMulSum(&op, &s, collFloat32, collScalarHostImmediate, c), collInvalidUsage);
  }
  Job fresh(1);
  ASSERT_TRUE(fresh.ok());
  float in = 1, out = 0;
  EXPECT_EQ(collAllReduce(&in, &out, 1, collFloat32, op, fresh.comm(0), nullptr), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(fresh.comm(0)), "was destroyed (by collRedOpDestroy, or with its communicator)"))
      << collGetLastError(fresh.comm(0));
}

}  // namespace
