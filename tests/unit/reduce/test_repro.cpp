// The reproducible sum kernel (comm/repro.hpp): the same bits for any order of the inputs
// and any number of added zero inputs; within the documented bound of the exact sum (a
// quad-precision sum of inputs whose range keeps it exact); never worse than a float32 sum
// in rank order beyond that bound; IEEE special values; overflow to infinity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/error.hpp"
#include "base/reduce.hpp"
#include "comm/repro.hpp"

namespace {

#if defined(__x86_64__) || defined(__i386__)
using Quad = __float128;  // IEEE binary128 (soft float): 113 bits
#else
using Quad = long double;
#endif

Quad qabs(Quad x) { return x < 0 ? -x : x; }

template <typename T>
std::vector<T> sumOf(const std::vector<std::vector<T>>& in, collDataType_t dt, int divisor = 1) {
  const size_t m = in[0].size();
  std::vector<T> packed;
  for (const auto& v : in) packed.insert(packed.end(), v.begin(), v.end());
  std::vector<T> out(m);
  coll::reproSumSlices(out.data(), packed.data(), m, static_cast<int>(in.size()), m, dt, divisor);
  return out;
}

template <typename T>
void expectSameBits(const std::vector<T>& a, const std::vector<T>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(T))) << what;
}

// Values m * 2^e, m uniform in [-1, 1) rounded to T, e uniform in [-spread, spread].
template <typename T>
std::vector<std::vector<T>> randomInputs(int n, size_t m, int spread, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> e(-spread, spread);
  std::vector<std::vector<T>> in(n, std::vector<T>(m));
  for (auto& v : in)
    for (auto& x : v) x = static_cast<T>(std::ldexp(u(rng), e(rng)));
  return in;
}

// E of an element: the smallest power of two above every |value| (as the kernel has it).
template <typename T>
int elementExponent(const std::vector<std::vector<T>>& in, size_t i) {
  T mx = 0;
  for (const auto& v : in) mx = std::max(mx, std::fabs(v[i]));
  int e;
  std::frexp(mx, &e);  // mx < 2^e
  return mx == 0 ? std::numeric_limits<T>::min_exponent : e;
}

TEST(Repro, SameBitsForAnyOrderAndAddedZeros) {
  for (int n : {1, 2, 3, 5, 8}) {
    auto in = randomInputs<float>(n, 1000, 30, 17 + n);
    const auto ref = sumOf(in, collFloat32);
    std::mt19937 rng(n);
    for (int t = 0; t < 5; ++t) {
      auto p = in;
      std::shuffle(p.begin(), p.end(), rng);
      for (int z = 0; z < t; ++z) p.insert(p.begin() + rng() % (p.size() + 1), std::vector<float>(1000, 0.0f));
      expectSameBits(sumOf(p, collFloat32), ref, "float32, permuted with zero inputs added");
    }
    auto d = randomInputs<double>(n, 1000, 200, 99 + n);
    const auto dref = sumOf(d, collFloat64);
    std::reverse(d.begin(), d.end());
    d.push_back(std::vector<double>(1000, 0.0));
    expectSameBits(sumOf(d, collFloat64), dref, "float64, reversed with a zero input added");
  }
}

// |got - exact| <= n * 2^(E - frac - 1) + half an ulp of got; the float32 bound of the docs.
TEST(Repro, Float32WithinBoundAndNoWorseThanARankOrderSum) {
  for (int n : {2, 4, 8}) {
    for (int spread : {0, 10, 40}) {  // up to 2^80 between values: the quad sum stays exact
      auto in = randomInputs<float>(n, 4000, spread, 1000 * n + spread);
      const auto got = sumOf(in, collFloat32);
      for (size_t i = 0; i < got.size(); ++i) {
        Quad exact = 0;
        float naive = in[0][i];
        for (int p = 0; p < n; ++p) exact += in[p][i];
        for (int p = 1; p < n; ++p) naive += in[p][i];
        const int e = elementExponent(in, i);
        const Quad grid = static_cast<Quad>(std::ldexp(1.0, e - coll::kReproFracBits - 1)) * n;
        const float g = got[i];
        const Quad halfUlp = static_cast<Quad>(std::nextafter(std::fabs(g), INFINITY) - std::fabs(g)) / 2;
        const Quad err = qabs(static_cast<Quad>(g) - exact);
        ASSERT_LE(err, grid + halfUlp) << "n " << n << " element " << i;
        ASSERT_LE(err, qabs(static_cast<Quad>(naive) - exact) + 2 * grid) << "n " << n << " element " << i;
      }
    }
  }
}

TEST(Repro, Float64WithinBound) {
  for (int n : {2, 7}) {
    auto in = randomInputs<double>(n, 4000, 25, 5 + n);  // range 2^50: exact in quad
    const auto got = sumOf(in, collFloat64);
    for (size_t i = 0; i < got.size(); ++i) {
      Quad exact = 0;
      for (int p = 0; p < n; ++p) exact += in[p][i];
      const int e = elementExponent(in, i);
      const Quad grid = static_cast<Quad>(std::ldexp(1.0, e - 2 * coll::kReproFracBits - 1)) * n;
      const double g = got[i];
      const Quad halfUlp = static_cast<Quad>(std::nextafter(std::fabs(g), INFINITY) - std::fabs(g)) / 2;
      ASSERT_LE(qabs(static_cast<Quad>(g) - exact), grid + halfUlp) << "element " << i;
    }
  }
  // One input comes back unchanged: 53 bits fit in the 100 fraction bits.
  auto one = randomInputs<double>(1, 1000, 300, 3);
  expectSameBits(sumOf(one, collFloat64), one[0], "float64, one input");
}

TEST(Repro, CancellationKeepsWhatAFloatSumLoses) {
  std::vector<std::vector<float>> in = {{1.0f}, {0x1p-30f}, {-1.0f}};
  EXPECT_EQ(sumOf(in, collFloat32)[0], 0x1p-30f);
  std::vector<std::vector<double>> d = {{1e300}, {1.0}, {-1e300}, {0x1p-40}};
  EXPECT_EQ(sumOf(d, collFloat64)[0], 0.0);  // below 2^(E - 100) relative to 1e300: rounded away
  std::vector<std::vector<double>> d2 = {{1.0}, {0x1p-90}, {-1.0}};
  EXPECT_EQ(sumOf(d2, collFloat64)[0], 0x1p-90);
  std::vector<std::vector<float>> sub = {{0x1p-149f}, {0x1p-149f}, {0x1p-148f}};
  EXPECT_EQ(sumOf(sub, collFloat32)[0], 0x1p-147f);  // subnormals add exactly
}

TEST(Repro, SpecialValuesAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max();
  std::vector<std::vector<float>> in = {{inf, inf, nan, 1.0f, big, -big, -inf, 2.0f},
                                        {1.0f, -inf, 1.0f, nan, big, -big, -3.0f, -2.0f}};
  const auto r = sumOf(in, collFloat32);
  EXPECT_EQ(r[0], inf);
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_TRUE(std::isnan(r[2]));
  EXPECT_TRUE(std::isnan(r[3]));
  EXPECT_EQ(r[4], inf);   // overflow rounds to infinity, as IEEE addition does
  EXPECT_EQ(r[5], -inf);
  EXPECT_EQ(r[6], -inf);
  EXPECT_EQ(r[7], 0.0f);
  EXPECT_FALSE(std::signbit(r[7]));
  // The NaN is the canonical quiet one, whatever the inputs' payloads.
  uint32_t bits;
  std::memcpy(&bits, &r[2], 4);
  EXPECT_EQ(bits, 0x7fc00000u);
  const double dinf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> d = {{dinf, 1e308, -dinf}, {-dinf, 1e308, 5.0}};
  const auto rd = sumOf(d, collFloat64);
  EXPECT_TRUE(std::isnan(rd[0]));
  EXPECT_EQ(rd[1], dinf);
  EXPECT_EQ(rd[2], -dinf);
}

// 16-bit types: the result is the exact sum rounded once (nearest even) for inputs that
// the grid holds exactly, as ordinary data here.
template <uint16_t (*Narrow)(float), float (*Widen)(uint16_t)>
void checkSixteen(collDataType_t dt, int spread) {
  for (int n : {2, 5, 8}) {
    auto f = randomInputs<float>(n, 3000, spread, 77 + n);
    std::vector<std::vector<uint16_t>> in(n, std::vector<uint16_t>(3000));
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < 3000; ++i) in[p][i] = Narrow(f[p][i]);
    const auto got = sumOf(in, dt);
    auto rev = in;
    std::reverse(rev.begin(), rev.end());
    expectSameBits(sumOf(rev, dt), got, "16-bit, reversed");
    for (size_t i = 0; i < 3000; ++i) {
      Quad exact = 0;
      for (int p = 0; p < n; ++p) exact += Widen(in[p][i]);
      const uint16_t g = got[i];
      const Quad gv = Widen(g);
      // No representable neighbour is nearer the exact sum.
      for (uint16_t nb : {static_cast<uint16_t>(g - 1), static_cast<uint16_t>(g + 1)}) {
        const float nv = Widen(nb);
        if (std::isnan(nv) || std::signbit(nv) != std::signbit(Widen(g))) continue;
        ASSERT_LE(qabs(gv - exact), qabs(static_cast<Quad>(nv) - exact)) << "element " << i << " n " << n;
      }
    }
  }
}

TEST(Repro, HalfAndBfloat16AreCorrectlyRounded) {
  checkSixteen<coll::floatToHalf, coll::halfToFloat>(collFloat16, 4);
  checkSixteen<coll::floatToBf16, coll::bf16ToFloat>(collBfloat16, 8);
}

TEST(Repro, AverageIsTheSumDividedOnce) {
  auto in = randomInputs<float>(6, 2000, 20, 4);
  const auto sum = sumOf(in, collFloat32);
  const auto avg = sumOf(in, collFloat32, 6);
  for (size_t i = 0; i < sum.size(); ++i)
    ASSERT_EQ(avg[i], static_cast<float>(static_cast<double>(sum[i]) / 6)) << i;
  auto d = randomInputs<double>(3, 2000, 20, 5);
  const auto dsum = sumOf(d, collFloat64);
  const auto davg = sumOf(d, collFloat64, 3);
  for (size_t i = 0; i < dsum.size(); ++i) ASSERT_EQ(davg[i], dsum[i] / 3) << i;
}

TEST(Repro, RefusesOtherTypes) {
  int32_t a[4] = {}, out[4];
  try {
    coll::reproSumSlices(out, a, 2, 2, 2, collInt32, 1);
    FAIL() << "int32 was accepted";
  } catch (const coll::Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("floating"), std::string::npos) << e.what();
  }
}

}  // namespace
