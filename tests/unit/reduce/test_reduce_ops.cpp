// reduceBuffers / finishAverage for every data type and op against a scalar reference,
// plus the determinism rules (bitwise commutativity, canonical NaN) and aliasing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/reduce.hpp"
#include "reference.hpp"

namespace {

using reftest::bits;
using reftest::Format;

const collRedOp_t kFloatOps[] = {collSum, collProd, collMax, collMin, collAvg};
const collRedOp_t kIntOps[] = {collSum, collProd, collMax, collMin, collAvg, collBand, collBor, collBxor};

// Every op the type takes: the bitwise ones on integer types only.
template <typename C>
std::vector<collRedOp_t> opsFor() {
  if (std::is_floating_point_v<typename C::Type> || C::is16) return {std::begin(kFloatOps), std::end(kFloatOps)};
  return {std::begin(kIntOps), std::end(kIntOps)};
}

template <typename T, collDataType_t DT>
struct Case {
  using Type = T;
  static constexpr collDataType_t dt = DT;
  static constexpr bool is16 = DT == collFloat16 || DT == collBfloat16;
  static Format format() { return DT == collFloat16 ? reftest::kHalf : reftest::kBf16; }
};

using AllCases = ::testing::Types<
    Case<int8_t, collInt8>, Case<uint8_t, collUint8>, Case<int32_t, collInt32>,
    Case<uint32_t, collUint32>, Case<int64_t, collInt64>, Case<uint64_t, collUint64>,
    Case<uint16_t, collFloat16>, Case<float, collFloat32>, Case<double, collFloat64>,
    Case<uint16_t, collBfloat16>, Case<int16_t, collInt16>, Case<uint16_t, collUint16>>;

// Wrap-around through 128-bit arithmetic, a different route than the kernel's.
template <typename T>
T refInt(T a, T b, collRedOp_t op) {
  using U = std::make_unsigned_t<T>;
  const auto wa = static_cast<unsigned __int128>(static_cast<__int128>(a));
  const auto wb = static_cast<unsigned __int128>(static_cast<__int128>(b));
  switch (op) {
    case collSum: case collAvg: return static_cast<T>(static_cast<U>(wa + wb));
    case collProd: return static_cast<T>(static_cast<U>(wa * wb));
    case collMax: return std::max(a, b);
    case collBand: return static_cast<T>(static_cast<U>(wa & wb));
    case collBor: return static_cast<T>(static_cast<U>(wa | wb));
    case collBxor: return static_cast<T>(static_cast<U>(wa ^ wb));
    default: return std::min(a, b);
  }
}

// IEEE result in double (or T), with the library's rules: any NaN is the canonical
// one, and -0 < +0 for max/min. NaN as the return means "expect canonical NaN".
double refFloat(double a, double b, collRedOp_t op) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  switch (op) {
    case collSum: case collAvg: return a + b;
    case collProd: return a * b;
    case collMax:
      if (a == 0 && b == 0) return (std::signbit(a) && std::signbit(b)) ? -0.0 : 0.0;
      return std::max(a, b);
    default:
      if (a == 0 && b == 0) return (std::signbit(a) || std::signbit(b)) ? -0.0 : 0.0;
      return std::min(a, b);
  }
}

template <typename C>
typename C::Type expected(typename C::Type a, typename C::Type b, collRedOp_t op) {
  using T = typename C::Type;
  if constexpr (C::is16) {
    const Format f = C::format();
    const double r = refFloat(reftest::decode(a, f), reftest::decode(b, f), op);
    // The canonical float NaN (0x7fc00000) narrowed: quiet bit only.
    if (std::isnan(r)) return static_cast<T>(f.expMask() | (1u << (f.mbits - 1)));
    return static_cast<T>(reftest::encode(r, f));
  } else if constexpr (std::is_floating_point_v<T>) {
    // float: computing in double and rounding once is the correctly rounded float result.
    const T r = static_cast<T>(refFloat(a, b, op));
    return std::isnan(r) ? std::numeric_limits<T>::quiet_NaN() : r;
  } else {
    return refInt(a, b, op);
  }
}

template <typename T>
std::string hex(T v) {
  using U = std::conditional_t<sizeof(T) == 1, uint8_t,
            std::conditional_t<sizeof(T) == 2, uint16_t,
            std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, static_cast<uint64_t>(bits<U>(v)));
  return buf;
}

template <typename T>
::testing::AssertionResult sameBits(const std::vector<T>& got, const std::vector<T>& want,
                                    const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return ::testing::AssertionFailure() << "at " << i << ": a=" << hex(a[i]) << " b=" << hex(b[i])
                                           << " got " << hex(got[i]) << " want " << hex(want[i]);
  }
  return ::testing::AssertionSuccess();
}

template <typename C>
class ReduceOps : public ::testing::Test {};
TYPED_TEST_SUITE(ReduceOps, AllCases);

TYPED_TEST(ReduceOps, MatchesScalarReference) {
  using T = typename TypeParam::Type;
  // Odd sizes leave vector tails; 2500 spans several of the 16-bit kernels' blocks.
  for (size_t n : {size_t{1}, size_t{7}, size_t{2500}}) {
    const auto a = reftest::randomValues<T>(n, 11 + n, TypeParam::is16);
    const auto b = reftest::randomValues<T>(n, 23 + n, TypeParam::is16);
    for (collRedOp_t op : opsFor<TypeParam>()) {
      std::vector<T> got(n), want(n);
      coll::reduceBuffers(got.data(), a.data(), b.data(), n, TypeParam::dt, op);
      for (size_t i = 0; i < n; ++i) want[i] = expected<TypeParam>(a[i], b[i], op);
      EXPECT_TRUE(sameBits(got, want, a, b)) << "op " << op << " n " << n;
    }
  }
}

TYPED_TEST(ReduceOps, BitwiseCommutative) {
  using T = typename TypeParam::Type;
  const size_t n = 3001;
  auto a = reftest::randomValues<T>(n, 5, TypeParam::is16);
  auto b = reftest::randomValues<T>(n, 6, TypeParam::is16);
  if constexpr (std::is_floating_point_v<T>) {  // NaNs of different sign and payload
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const U qnan = bits<U>(std::numeric_limits<T>::quiet_NaN());
    for (size_t i = 0; i < n; i += 5) a[i] = bits<T>(static_cast<U>(qnan + i + 1));
    for (size_t i = 0; i < n; i += 7) b[i] = -std::numeric_limits<T>::quiet_NaN();
  }
  for (collRedOp_t op : opsFor<TypeParam>()) {
    std::vector<T> ab(n), ba(n);
    coll::reduceBuffers(ab.data(), a.data(), b.data(), n, TypeParam::dt, op);
    coll::reduceBuffers(ba.data(), b.data(), a.data(), n, TypeParam::dt, op);
    EXPECT_TRUE(sameBits(ab, ba, a, b)) << "op " << op;
  }
}

TYPED_TEST(ReduceOps, InPlaceEqualsOutOfPlace) {
  using T = typename TypeParam::Type;
  const size_t n = 1031;
  const auto a = reftest::randomValues<T>(n, 7, TypeParam::is16);
  const auto b = reftest::randomValues<T>(n, 8, TypeParam::is16);
  for (collRedOp_t op : opsFor<TypeParam>()) {
    std::vector<T> want(n), aa(n);
    coll::reduceBuffers(want.data(), a.data(), b.data(), n, TypeParam::dt, op);
    auto x = a;
    coll::reduceBuffers(x.data(), x.data(), b.data(), n, TypeParam::dt, op);
    EXPECT_TRUE(sameBits(x, want, a, b)) << "dst == a, op " << op;
    auto y = b;
    coll::reduceBuffers(y.data(), a.data(), y.data(), n, TypeParam::dt, op);
    EXPECT_TRUE(sameBits(y, want, a, b)) << "dst == b, op " << op;
    auto z = a;
    coll::reduceBuffers(aa.data(), a.data(), a.data(), n, TypeParam::dt, op);
    coll::reduceBuffers(z.data(), z.data(), z.data(), n, TypeParam::dt, op);
    EXPECT_TRUE(sameBits(z, aa, a, a)) << "dst == a == b, op " << op;
  }
}

TYPED_TEST(ReduceOps, FinishAverageDividesOnce) {
  using T = typename TypeParam::Type;
  const size_t n = 1500;
  const auto src = reftest::randomValues<T>(n, 9, TypeParam::is16);
  for (int ranks : {1, 2, 3, 4, 7, 8, 1000, 1024}) {
    auto got = src;
    coll::finishAverage(got.data(), n, TypeParam::dt, ranks);
    std::vector<T> want(n);
    for (size_t i = 0; i < n; ++i) {
      if (ranks == 1) {  // dividing by 1 leaves the buffer alone (signalling NaNs included)
        want[i] = src[i];
      } else if constexpr (TypeParam::is16) {
        const Format f = TypeParam::format();
        // A NaN stays NaN; the quiet bit is added (as by a widening conversion).
        want[i] = reftest::isNanBits(src[i], f)
                      ? static_cast<T>(src[i] | (1u << (f.mbits - 1)))
                      : static_cast<T>(reftest::encode(reftest::decode(src[i], f) / ranks, f));
      } else if constexpr (std::is_floating_point_v<T>) {
        want[i] = static_cast<T>(src[i] / static_cast<T>(ranks));
      } else {
        want[i] = static_cast<T>(src[i] / ranks);  // truncates toward 0 (ranks may not fit T)
      }
    }
    EXPECT_TRUE(sameBits(got, want, src, src)) << "n = " << ranks;
  }
}

// Results of 8 MiB and more out of place go through streaming stores with an aligned
// head and a tail; compare with the same reduction done in small (cached) pieces, and
// check the bytes around dst are untouched.
template <typename T>
void checkLargeOutOfPlace(collDataType_t dt, collRedOp_t op, bool is16 = false) {
  const size_t n = (size_t{9} << 20) / sizeof(T) + 13;
  const auto a = reftest::randomValues<T>(n, 31, is16);
  const auto b = reftest::randomValues<T>(n, 37, is16);
  std::vector<T> want(n);
  const size_t piece = 4096;
  for (size_t off = 0; off < n; off += piece)
    coll::reduceBuffers(want.data() + off, a.data() + off, b.data() + off,
                        std::min(piece, n - off), dt, op);
  for (size_t shift : {size_t{0}, size_t{1}, size_t{3}}) {  // dst misaligned by whole elements
    std::vector<T> storage(n + 8, T{});
    const T guard = storage[0];
    T* dst = storage.data() + 1 + shift;
    coll::reduceBuffers(dst, a.data(), b.data(), n, dt, op);
    const std::vector<T> got(dst, dst + n);
    EXPECT_TRUE(sameBits(got, want, a, b)) << "type " << dt << " op " << op << " shift " << shift;
    EXPECT_EQ(std::memcmp(&storage[shift], &guard, sizeof(T)), 0) << "wrote before dst";
    EXPECT_EQ(std::memcmp(&dst[n], &guard, sizeof(T)), 0) << "wrote past dst";
  }
}

TEST(ReduceLarge, StreamedResultsMatchCachedOnes) {
  checkLargeOutOfPlace<float>(collFloat32, collSum);
  checkLargeOutOfPlace<double>(collFloat64, collMax);
  checkLargeOutOfPlace<int8_t>(collInt8, collProd);
  checkLargeOutOfPlace<uint16_t>(collFloat16, collMin, true);
  checkLargeOutOfPlace<uint16_t>(collBfloat16, collSum, true);
}

TEST(ReduceEdges, BitwiseOpsRefuseFloatingTypes) {
  float f[2] = {1.0f, 2.0f};
  uint16_t h[2] = {0x3c00, 0x4000};
  for (collRedOp_t op : {collBand, collBor, collBxor}) {
    EXPECT_THROW(coll::reduceBuffers(f, f, f, 2, collFloat32, op), coll::Error);
    EXPECT_THROW(coll::reduceBuffers(h, h, h, 2, collFloat16, op), coll::Error);
    EXPECT_THROW(coll::reduceBuffers(h, h, h, 2, collBfloat16, op), coll::Error);
  }
}

TEST(ReduceEdges, Int16Values) {
  int16_t a[] = {INT16_MAX, -5, 0x0ff0}, b[] = {1, 3, 0x00ff}, r[3];
  coll::reduceBuffers(r, a, b, 3, collInt16, collSum);
  EXPECT_EQ(r[0], INT16_MIN);  // wraps
  EXPECT_EQ(r[1], -2);
  coll::reduceBuffers(r, a, b, 3, collInt16, collBand);
  EXPECT_EQ(r[2], 0x00f0);
  coll::reduceBuffers(r, a, b, 3, collInt16, collBxor);
  EXPECT_EQ(r[2], 0x0f0f);
  uint16_t u[] = {65535, 7}, v[] = {2, 9}, w[2];
  coll::reduceBuffers(w, u, v, 2, collUint16, collSum);
  EXPECT_EQ(w[0], 1);
  coll::reduceBuffers(w, u, v, 2, collUint16, collMax);
  EXPECT_EQ(w[1], 9);
  coll::finishAverage(v, 2, collUint16, 2);
  EXPECT_EQ(v[1], 4);
}

TEST(ReduceEdges, IntegerWrapAround) {
  int32_t a32[] = {INT32_MAX, INT32_MIN, -7}, b32[] = {1, -1, 3}, r32[3];
  coll::reduceBuffers(r32, a32, b32, 3, collInt32, collSum);
  EXPECT_EQ(r32[0], INT32_MIN);
  EXPECT_EQ(r32[1], INT32_MAX);
  EXPECT_EQ(r32[2], -4);
  uint8_t a8[] = {200, 16}, b8[] = {100, 16}, r8[2];
  coll::reduceBuffers(r8, a8, b8, 2, collUint8, collSum);
  EXPECT_EQ(r8[0], 44);
  coll::reduceBuffers(r8, a8, b8, 2, collUint8, collProd);
  EXPECT_EQ(r8[1], 0);  // 256 wraps to 0
  int64_t a64[] = {INT64_MIN}, b64[] = {-1}, r64[1];
  coll::reduceBuffers(r64, a64, b64, 1, collInt64, collProd);
  EXPECT_EQ(r64[0], INT64_MIN);
}

TEST(ReduceEdges, FloatDeterminismRules) {
  const float nanA = bits<float>(0xffc00123u), nanB = bits<float>(0x7f800001u);  // -qNaN, sNaN
  const float a[] = {-0.0f, 0.0f, nanA, 1.0f, INFINITY, 0.0f};
  const float b[] = {0.0f, -0.0f, nanB, nanB, -INFINITY, INFINITY};
  float mx[6], mn[6], sum[6], prod[6];
  coll::reduceBuffers(mx, a, b, 6, collFloat32, collMax);
  coll::reduceBuffers(mn, a, b, 6, collFloat32, collMin);
  coll::reduceBuffers(sum, a, b, 6, collFloat32, collSum);
  coll::reduceBuffers(prod, a, b, 6, collFloat32, collProd);
  EXPECT_EQ(bits<uint32_t>(mx[0]), 0u);           // max(-0, +0) = +0
  EXPECT_EQ(bits<uint32_t>(mx[1]), 0u);
  EXPECT_EQ(bits<uint32_t>(mn[0]), 0x80000000u);  // min(-0, +0) = -0
  EXPECT_EQ(bits<uint32_t>(mn[1]), 0x80000000u);
  EXPECT_EQ(bits<uint32_t>(mx[2]), 0x7fc00000u);  // NaN in: canonical NaN out
  EXPECT_EQ(bits<uint32_t>(mn[3]), 0x7fc00000u);
  EXPECT_EQ(bits<uint32_t>(sum[2]), 0x7fc00000u);
  EXPECT_EQ(bits<uint32_t>(sum[4]), 0x7fc00000u);  // Inf + -Inf
  EXPECT_EQ(bits<uint32_t>(prod[5]), 0x7fc00000u); // 0 * Inf
  EXPECT_EQ(mx[4], INFINITY);
  EXPECT_EQ(mn[4], -INFINITY);
}

TEST(ReduceEdges, AverageTruncatesAndDivides) {
  int32_t i32[] = {-7, 7, INT32_MIN, INT32_MAX};
  coll::finishAverage(i32, 4, collInt32, 2);
  EXPECT_EQ(i32[0], -3);  // truncation, not floor
  EXPECT_EQ(i32[1], 3);
  EXPECT_EQ(i32[2], INT32_MIN / 2);
  EXPECT_EQ(i32[3], INT32_MAX / 2);
  uint32_t u32[] = {UINT32_MAX, UINT32_MAX - 1};
  coll::finishAverage(u32, 2, collUint32, 3);
  EXPECT_EQ(u32[0], UINT32_MAX / 3);
  EXPECT_EQ(u32[1], (UINT32_MAX - 1) / 3);
  double d[] = {1.0};
  coll::finishAverage(d, 1, collFloat64, 3);
  EXPECT_EQ(d[0], 1.0 / 3.0);
}

// Powers of two are averaged by multiplying with the exact reciprocal: the same bits as
// the division, also where the quotient is subnormal, rounds to zero, or is a NaN/Inf.
template <typename T>
void checkPowerOfTwoAverage() {
  using Lim = std::numeric_limits<T>;
  std::vector<T> src = {Lim::denorm_min(), -Lim::denorm_min(), Lim::min(), -Lim::min(),
                        Lim::min() * T(3), Lim::denorm_min() * T(5), Lim::max(), -Lim::max(),
                        Lim::infinity(), -Lim::infinity(), T(0), -T(0), T(1), T(-3), T(1e-30),
                        T(0.1), Lim::epsilon(), T(7) / T(3)};
  for (int i = 1; i < 200; ++i) src.push_back(Lim::min() * static_cast<T>(i) / T(64));
  for (int ranks : {2, 4, 8, 64, 1 << 20}) {
    auto got = src;
    coll::finishAverage(got.data(), got.size(), std::is_same_v<T, float> ? collFloat32 : collFloat64,
                        ranks);
    for (size_t i = 0; i < src.size(); ++i) {
      const T want = src[i] / static_cast<T>(ranks);
      EXPECT_EQ(std::memcmp(&got[i], &want, sizeof(T)), 0)
          << src[i] << " / " << ranks << ": got " << got[i] << ", want " << want;
    }
  }
}

TEST(ReduceEdges, PowerOfTwoAverageHasTheDivisionsBits) {
  checkPowerOfTwoAverage<float>();
  checkPowerOfTwoAverage<double>();
}

TEST(ReduceEdges, BadArgumentsThrow) {
  float a[8] = {}, b[8] = {};
  auto expectInvalid = [](auto&& fn, const char* what) {
    try {
      fn();
      ADD_FAILURE() << what << ": no exception";
    } catch (const coll::Error& e) {
      EXPECT_EQ(e.code(), collInvalidArgument) << what;
      EXPECT_NE(std::string(e.what()), "") << what;
    }
  };
  expectInvalid([&] { coll::reduceBuffers(a, a, b, 8, collNumTypes, collSum); }, "bad type");
  expectInvalid([&] { coll::reduceBuffers(a, a, b, 8, collFloat32, collNumOps); }, "bad op");
  expectInvalid([&] { coll::reduceBuffers(nullptr, a, b, 8, collFloat32, collSum); }, "null dst");
  expectInvalid([&] { coll::reduceBuffers(a + 1, a, b, 4, collFloat32, collSum); }, "overlap");
  expectInvalid([&] { coll::finishAverage(a, 8, collFloat32, 0); }, "n = 0");
  expectInvalid([&] { coll::finishAverage(a, 8, static_cast<collDataType_t>(-1), 2); }, "bad type");
  coll::reduceBuffers(nullptr, nullptr, nullptr, 0, collFloat32, collSum);  // count 0: no-op
  coll::reduceBuffers(a, a + 4, b, 4, collFloat32, collSum);                 // adjacent is fine
}

}  // namespace
