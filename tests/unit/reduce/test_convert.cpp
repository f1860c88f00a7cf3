// float16 / bfloat16 conversions: exhaustive over the 65536 16-bit patterns, against a
// frexp/ldexp reference for float inputs, hand-picked rounding cases, and (when the CPU
// has F16C) bit-for-bit against the hardware instructions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/reduce.hpp"
#include "reference.hpp"

namespace {

using reftest::bits;
using reftest::kBf16;
using reftest::kHalf;

// Float inputs that exercise rounding at every exponent: for each sign and exponent,
// every value of the top 10 fraction bits crossed with the low-13-bit patterns that
// decide rounding (exact, just above, tie, just below), plus random patterns.
std::vector<float> roundingSamples() {
  std::vector<float> v;
  const uint32_t lows[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x0800, 0x17ff};
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t e = 0; e < 256; ++e)
      for (uint32_t top = 0; top < 1024; top += (e >= 96 && e <= 145) ? 1 : 37)
        for (uint32_t low : lows)
          v.push_back(bits<float>((sign << 31) | (e << 23) | (top << 13) | low));
  std::mt19937 rng(42);
  for (int i = 0; i < (1 << 20); ++i) v.push_back(bits<float>(static_cast<uint32_t>(rng())));
  return v;
}

uint16_t refToHalf(float f) {
  const uint32_t x = bits<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>(((x >> 16) & 0x8000) | 0x7e00 | ((x >> 13) & 0x3ff));
  return static_cast<uint16_t>(reftest::encode(f, kHalf));
}
uint16_t refToBf16(float f) {
  const uint32_t x = bits<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>(reftest::encode(f, kBf16));
}

TEST(HalfConvert, AllPatternsWidenAndRoundTrip) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> bulk(65536);
  coll::halfToFloatN(bulk.data(), all.data(), all.size());
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = coll::halfToFloat(static_cast<uint16_t>(h));
    ASSERT_EQ(bits<uint32_t>(f), bits<uint32_t>(bulk[h])) << std::hex << h;
    if (reftest::isNanBits(h, kHalf)) {
      // Sign and payload kept, made quiet.
      ASSERT_EQ(bits<uint32_t>(f), ((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13))
          << std::hex << h;
      ASSERT_EQ(coll::floatToHalf(f), h | 0x200u) << std::hex << h;
    } else {
      const double want = reftest::decode(h, kHalf);
      ASSERT_EQ(bits<uint32_t>(f), bits<uint32_t>(static_cast<float>(want))) << std::hex << h;
      ASSERT_EQ(coll::floatToHalf(f), h) << std::hex << h;
    }
  }
}

TEST(HalfConvert, MatchesReferenceRounding) {
  const auto in = roundingSamples();
  std::vector<uint16_t> bulk(in.size());
  coll::floatToHalfN(bulk.data(), in.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t want = refToHalf(in[i]);
    ASSERT_EQ(coll::floatToHalf(in[i]), want) << std::hex << bits<uint32_t>(in[i]);
    ASSERT_EQ(bulk[i], want) << std::hex << bits<uint32_t>(in[i]);
  }
}

TEST(HalfConvert, HandPickedCases) {
  auto h = [](float f) { return coll::floatToHalf(f); };
  EXPECT_EQ(h(1.0f + 0x1p-11f), 0x3c00);        // tie, even is down
  EXPECT_EQ(h(1.0f + 3 * 0x1p-11f), 0x3c02);    // tie, even is up
  EXPECT_EQ(h(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(h(65504.0f), 0x7bff);               // largest finite
  EXPECT_EQ(h(65519.996f), 0x7bff);
  EXPECT_EQ(h(65520.0f), 0x7c00);               // tie rounds to even = overflow to Inf
  EXPECT_EQ(h(1e10f), 0x7c00);
  EXPECT_EQ(h(-1e10f), 0xfc00);
  EXPECT_EQ(h(-INFINITY), 0xfc00);
  EXPECT_EQ(h(0x1p-24f), 0x0001);               // smallest subnormal
  EXPECT_EQ(h(0x1p-25f), 0x0000);               // tie with 0: even
  EXPECT_EQ(h(0x1p-25f + 0x1p-40f), 0x0001);
  EXPECT_EQ(h(3 * 0x1p-25f), 0x0002);           // tie between 1 and 2 subnormal units
  EXPECT_EQ(h(0x1p-14f - 0x1p-24f), 0x03ff);    // largest subnormal
  EXPECT_EQ(h(0x1p-14f - 0x1p-26f), 0x0400);    // rounds up into the normal range
  EXPECT_EQ(h(-0.0f), 0x8000);
  EXPECT_EQ(h(bits<float>(0x00000001u)), 0x0000);  // float subnormal
  EXPECT_EQ(h(bits<float>(0xff800001u)), 0xfe00);  // sNaN: quiet, sign kept
  EXPECT_EQ(h(bits<float>(0x7fc02000u)), 0x7e01);  // payload's top bits kept
  EXPECT_EQ(bits<uint32_t>(coll::halfToFloat(0x0001)), bits<uint32_t>(0x1p-24f));
  EXPECT_EQ(coll::halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(coll::halfToFloat(0xc000), -2.0f);
}

TEST(Bf16Convert, AllPatternsWidenAndRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = coll::bf16ToFloat(static_cast<uint16_t>(b));
    ASSERT_EQ(bits<uint32_t>(f), b << 16);  // widening is exact, NaN payload included
    const uint16_t back = coll::floatToBf16(f);
    ASSERT_EQ(back, reftest::isNanBits(b, kBf16) ? (b | 0x40u) : b) << std::hex << b;
  }
}

TEST(Bf16Convert, MatchesReferenceRounding) {
  auto in = roundingSamples();
  for (uint32_t i = 0; i < 65536; ++i)  // the 16 dropped bits' rounding at a few exponents
    for (uint32_t e : {0u, 1u, 127u, 254u}) in.push_back(bits<float>((e << 23) | (0x10000u * 5) | i));
  std::vector<uint16_t> bulk(in.size());
  coll::floatToBf16N(bulk.data(), in.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t want = refToBf16(in[i]);
    ASSERT_EQ(coll::floatToBf16(in[i]), want) << std::hex << bits<uint32_t>(in[i]);
    ASSERT_EQ(bulk[i], want) << std::hex << bits<uint32_t>(in[i]);
  }
}

TEST(Bf16Convert, HandPickedCases) {
  auto b = [](float f) { return coll::floatToBf16(f); };
  EXPECT_EQ(b(1.0f + 0x1p-8f), 0x3f80);       // tie, even is down
  EXPECT_EQ(b(1.0f + 3 * 0x1p-8f), 0x3f82);   // tie, even is up
  EXPECT_EQ(b(bits<float>(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to Inf
  EXPECT_EQ(b(bits<float>(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(b(bits<float>(0x00008000u)), 0x0000);  // subnormal tie: even
  EXPECT_EQ(b(bits<float>(0x00018000u)), 0x0002);
  EXPECT_EQ(b(bits<float>(0x80008001u)), 0x8001);
  EXPECT_EQ(b(bits<float>(0x7f800001u)), 0x7fc0);  // sNaN whose payload is all dropped
  EXPECT_EQ(b(-INFINITY), 0xff80);
}

TEST(Convert, BulkMatchesScalarAtEveryTailLength) {
  const auto in = reftest::randomValues<float>(67, 3);
  std::vector<uint16_t> halves(67), bfs(67);
  std::vector<float> back(67);
  for (size_t n = 0; n <= in.size(); ++n) {
    std::vector<uint16_t> h(n + 1, 0xabcd), b(n + 1, 0xabcd);
    coll::floatToHalfN(h.data(), in.data(), n);
    coll::floatToBf16N(b.data(), in.data(), n);
    EXPECT_EQ(h[n], 0xabcd) << "wrote past the end, n = " << n;
    EXPECT_EQ(b[n], 0xabcd) << "wrote past the end, n = " << n;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(h[i], coll::floatToHalf(in[i]));
      ASSERT_EQ(b[i], coll::floatToBf16(in[i]));
    }
    std::vector<float> hf(n), bf(n);
    coll::halfToFloatN(hf.data(), h.data(), n);
    coll::bf16ToFloatN(bf.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(bits<uint32_t>(hf[i]), bits<uint32_t>(coll::halfToFloat(h[i])));
      ASSERT_EQ(bits<uint32_t>(bf[i]), bits<uint32_t>(coll::bf16ToFloat(b[i])));
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) uint16_t hwToHalf(float f) {
  const __m128i h = _mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT);
  return static_cast<uint16_t>(_mm_extract_epi16(h, 0));
}
__attribute__((target("avx,f16c"))) float hwToFloat(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// Every rank must produce the same bits whether or not its CPU has F16C.
TEST(HalfConvert, SameBitsAsF16c) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "CPU without F16C";
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(bits<uint32_t>(coll::halfToFloat(static_cast<uint16_t>(h))),
              bits<uint32_t>(hwToFloat(static_cast<uint16_t>(h))))
        << std::hex << h;
  for (float f : roundingSamples())
    ASSERT_EQ(coll::floatToHalf(f), hwToHalf(f)) << std::hex << bits<uint32_t>(f);
}
#endif

}  // namespace
