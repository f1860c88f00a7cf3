// The reduction kernels against the CPU kernels (src/base/reduce.cpp), bit for bit, for
// every type and op: vector and scalar (unaligned) paths, in place, odd lengths, and the
// special values (NaN payloads, signed zeros, infinities, subnormals).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/reduce.hpp"
#include "base/types.hpp"
#include "cuda/kernels.hpp"
#include "gpu_util.hpp"

namespace {

using Bytes = std::vector<uint8_t>;

// Random bit patterns with every special value of the type near the start.
Bytes randomElements(collDataType_t dt, size_t n, uint32_t seed) {
  const size_t es = coll::typeSize(dt);
  Bytes b(n * es);
  std::mt19937 rng(seed);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  auto put = [&](size_t i, uint64_t bits) {
    if (i < n) std::memcpy(&b[i * es], &bits, es);
  };
  const uint64_t specials32[] = {0x0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001,
                                 0xffc00123, 0x00000001, 0x807fffff, 0x3f800000};
  const uint64_t specials16[] = {0x0, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe12, 0x0001, 0x83ff, 0x3c00};
  const uint64_t specials64[] = {0x0, 0x8000000000000000ull, 0x7ff0000000000000ull, 0x7ff8000000000000ull,
                                 0x7ff0000000000001ull, 0x0000000000000001ull, 0x3ff0000000000000ull};
  if (dt == collFloat32)
    for (size_t i = 0; i < 10; ++i) put(i, specials32[i]), put(i + 10, specials32[9 - i]);
  if (dt == collFloat16)
    for (size_t i = 0; i < 10; ++i) put(i, specials16[i]), put(i + 10, specials16[9 - i]);
  if (dt == collBfloat16)
    for (size_t i = 0; i < 10; ++i) put(i, specials32[i] >> 16), put(i + 10, specials32[9 - i] >> 16);
  if (dt == collFloat64)
    for (size_t i = 0; i < 7; ++i) put(i, specials64[i]), put(i + 7, specials64[6 - i]);
  return b;
}

size_t firstDifference(const Bytes& x, const Bytes& y, size_t es) {
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != y[i]) return i / es;
  return SIZE_MAX;
}

class GpuReduce : public ::testing::TestWithParam<std::tuple<collDataType_t, collRedOp_t>> {};

TEST_P(GpuReduce, MatchesCpuBitForBit) {
  COLL_REQUIRE_GPU();
  const auto [dt, op] = GetParam();
  const size_t es = coll::typeSize(dt);
  const size_t n = 1'000'003;  // odd: vector body plus a scalar tail
  const Bytes a = randomElements(dt, n + 1, 1), b = randomElements(dt, n + 1, 2);
  gputest::DeviceMemory da(a.size()), db(b.size()), dd(a.size());
  da.upload(a);
  db.upload(b);
  for (size_t skew : {size_t{0}, size_t{1}}) {  // skew 1: misaligned, scalar path
    Bytes ref(n * es);
    coll::reduceBuffers(ref.data(), a.data() + skew * es, b.data() + skew * es, n, dt, op);
    coll::cuda::reduce(dd.as<uint8_t>() + skew * es, da.as<uint8_t>() + skew * es,
                       db.as<uint8_t>() + skew * es, n, dt, op, nullptr);
    const Bytes got = dd.download<uint8_t>(n * es, skew * es);
    const size_t at = firstDifference(got, ref, es);
    EXPECT_EQ(at, SIZE_MAX) << coll::typeName(dt) << " " << coll::opName(op) << " skew " << skew
                            << ": first difference at element " << at;
  }
  // Commutative bit for bit, and in place (dst == a).
  coll::cuda::reduce(dd.get(), db.get(), da.get(), n, dt, op, nullptr);
  const Bytes ba = dd.download<uint8_t>(n * es);
  coll::cuda::reduce(da.get(), da.get(), db.get(), n, dt, op, nullptr);
  const Bytes inPlace = da.download<uint8_t>(n * es);
  Bytes ref(n * es);
  coll::reduceBuffers(ref.data(), a.data(), b.data(), n, dt, op);
  EXPECT_EQ(firstDifference(ba, ref, es), SIZE_MAX) << "op(b, a) != op(a, b)";
  EXPECT_EQ(firstDifference(inPlace, ref, es), SIZE_MAX) << "in place";
}

INSTANTIATE_TEST_SUITE_P(
    AllTypesAndOps, GpuReduce,
    ::testing::Combine(::testing::Values(collInt8, collUint8, collInt32, collUint32, collInt64, collUint64,
                                         collFloat16, collFloat32, collFloat64, collBfloat16),
                       ::testing::Values(collSum, collProd, collMax, collMin, collAvg)),
    [](const auto& info) {
      return std::string(coll::typeName(std::get<0>(info.param))) + "_" + coll::opName(std::get<1>(info.param));
    });

TEST(GpuReduce, FinishAverageMatchesCpu) {
  COLL_REQUIRE_GPU();
  const size_t n = 100'001;
  for (int dti = 0; dti < collNumTypes; ++dti) {
    const auto dt = static_cast<collDataType_t>(dti);
    const size_t es = coll::typeSize(dt);
    for (int ranks : {3, 1000}) {  // 1000 exceeds int8's range
      Bytes v = randomElements(dt, n, 3 + dti), ref = v;
      coll::finishAverage(ref.data(), n, dt, ranks);
      gputest::DeviceMemory d(v.size());
      d.upload(v);
      coll::cuda::finishAverage(d.get(), n, dt, ranks, nullptr);
      EXPECT_EQ(firstDifference(d.download<uint8_t>(n * es), ref, es), SIZE_MAX)
          << coll::typeName(dt) << " / " << ranks;
    }
  }
}

}  // namespace
