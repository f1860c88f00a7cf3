// Reproducible sums (comm/repro.hpp says what they compute; doc/algorithms.md why).
//
// The kernel works on blocks of kBlock elements in four passes over the n values of each
// element, every one a plain loop the compiler vectorises:
//  1. the largest exponent field among the finite values, and flags for +Inf, -Inf, NaN;
//  2. per element, the power of two 2^(kReproFracBits - E) that scales every value to at
//     most 2^kReproFracBits in magnitude;
//  3. each value, scaled in double (exactly: a float is exact in double, a power of two
//     scales exactly), is rounded to an integer by adding and subtracting 1.5 * 2^52,
//     whose bits less the constant's bits are that integer; the integers are added in
//     int64, exactly (n * 2^50 < 2^63 for n <= 4096). float64 also keeps the rounding
//     remainder scaled by 2^50 as a second integer, for 100 fraction bits in all;
//  4. the integer sum is rounded once to the type and scaled back by 2^(E - frac).
// Rounding in pass 3 uses the current rounding mode; it is round-to-nearest unless the
// application changed it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include "comm/repro.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "algorithms/team.hpp"
#include "base/error.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#endif

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define COLL_REPRO_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define COLL_REPRO_KERNEL
#endif

namespace coll {
namespace {

constexpr size_t kBlock = 256;
constexpr int kFrac = kReproFracBits;
constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
constexpr uint32_t kPosInf = 1, kNegInf = 2, kNan = 4;

inline double pow2(int k) {  // 2^k for k in [-1022, 1023]
  return __builtin_bit_cast(double, static_cast<uint64_t>(1023 + k) << 52);
}

// ---------------------------------------------------------------- float (and 16-bit)

// Pass 1 for one rank's values of a block.
COLL_REPRO_KERNEL void floatExponents(int32_t* emax, uint32_t* flags, const float* x, size_t m) {
  for (size_t i = 0; i < m; ++i) {
    const uint32_t u = __builtin_bit_cast(uint32_t, x[i]);
    const int32_t be = static_cast<int32_t>((u >> 23) & 0xffu);
    const bool sp = be == 0xff;
    const int32_t e = sp ? 0 : be;
    emax[i] = emax[i] > e ? emax[i] : e;
    const uint32_t kind = (u & 0x7fffffu) ? kNan : ((u >> 31) ? kNegInf : kPosInf);
    flags[i] |= sp ? kind : 0u;
  }
}

// Pass 3 for one rank's values of a block.
COLL_REPRO_KERNEL void floatAccumulate(int64_t* acc, const double* scale, const float* x, size_t m) {
  for (size_t i = 0; i < m; ++i) {
    // Specials count as 0 here (their flags decide the result); an integer select, as a
    // float one may not be speculated under -ftrapping-math and stops the vectoriser.
    const uint32_t u = __builtin_bit_cast(uint32_t, x[i]);
    const uint32_t keep = 0u - static_cast<uint32_t>(((u >> 23) & 0xffu) != 0xffu);
    const double v = static_cast<double>(__builtin_bit_cast(float, u & keep));
    const double t = v * scale[i] + kMagic;
    acc[i] += static_cast<int64_t>(__builtin_bit_cast(uint64_t, t) - __builtin_bit_cast(uint64_t, kMagic));
  }
}

// x's float nearest to s * 2^shift, rounded to odd at 24 bits when `odd` (so that a later
// rounding to 8 or 11 bits is correct), else to nearest even.
inline float intToFloat(int64_t s, bool odd) {
  if (!odd) return static_cast<float>(s);
  const uint64_t a = s < 0 ? 0 - static_cast<uint64_t>(s) : static_cast<uint64_t>(s);
  float f;
  if (a < (uint64_t{1} << 24)) {
    f = static_cast<float>(a);
  } else {
    const int sh = 40 - __builtin_clzll(a);
    uint64_t m = a >> sh;
    m |= (a & ((uint64_t{1} << sh) - 1)) != 0 ? 1u : 0u;
    f = static_cast<float>(m << sh);  // 24 significant bits: exact
  }
  return s < 0 ? -f : f;
}

inline float specialFloat(uint32_t f) {
  if ((f & kNan) || (f & (kPosInf | kNegInf)) == (kPosInf | kNegInf))
    return std::numeric_limits<float>::quiet_NaN();
  return (f & kPosInf) ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
}

enum class Narrow { None, Half, Bf16 };

// One element the vectorised pass below leaves alone: specials, and sums of 2^53 or more
// (only with more than 8 ranks).
template <Narrow N>
void finishFloatOne(void* out, size_t at, int64_t acc, int32_t emax, uint32_t flags, int divisor) {
  float r;
  if (flags) {
    r = specialFloat(flags);
  } else {
    const int e = std::max(emax, 1) - 126;
    const float f = intToFloat(acc, N != Narrow::None);
    r = static_cast<float>(static_cast<double>(f) * pow2(e - kFrac));
  }
  if constexpr (N == Narrow::None) {
    if (divisor > 1) r = static_cast<float>(static_cast<double>(r) / divisor);
    static_cast<float*>(out)[at] = r;
  } else {
    uint16_t h = N == Narrow::Half ? floatToHalf(r) : floatToBf16(r);
    if (divisor > 1) {
      const float w = N == Narrow::Half ? halfToFloat(h) : bf16ToFloat(h);
      const float q = w / static_cast<float>(divisor);  // 24 >= 2p + 2: one rounding in effect
      h = N == Narrow::Half ? floatToHalf(q) : floatToBf16(q);
    }
    static_cast<uint16_t*>(out)[at] = h;
  }
}

constexpr int64_t kExactDouble = int64_t{1} << 53;

// r[i] = acc[i] * 2^(E - frac) rounded to float: to nearest even, or to odd (`odd`, for
// a later rounding to 16 bits). Exact for |acc| < 2^53: acc's 32-bit halves convert
// exactly (the 2^52 tricks), their sum rounds once, the scaling is exact in double.
template <bool Odd>
COLL_REPRO_KERNEL void finishFloatLoop(float* r, const int64_t* acc, const int32_t* emax, size_t m) {
  const double two52 = 0x1p52;
  for (size_t i = 0; i < m; ++i) {
    const int64_t s = acc[i];
    const double lo = __builtin_bit_cast(double, 0x4330000000000000ull | (static_cast<uint64_t>(s) & 0xffffffffull)) - two52;
    const double hi = __builtin_bit_cast(double, __builtin_bit_cast(uint64_t, kMagic) + static_cast<uint64_t>(s >> 32)) - kMagic;
    const double d = hi * 4294967296.0 + lo;
    const int32_t em = emax[i] > 1 ? emax[i] : 1;
    const double v = d * __builtin_bit_cast(double, static_cast<uint64_t>(1023 + em - 126 - kFrac) << 52);
    float f = static_cast<float>(v);
    if constexpr (Odd) {
      const double back = static_cast<double>(f);
      uint32_t fb = __builtin_bit_cast(uint32_t, f);
      const bool nudge = back != v && (fb & 1u) == 0;
      const uint32_t step = std::fabs(back) < std::fabs(v) ? 1u : 0xffffffffu;
      fb += nudge ? step : 0u;
      f = __builtin_bit_cast(float, fb);
    }
    r[i] = f;
  }
}

// Whether any element of the block is special or too big for finishFloatLoop (a
// vectorised test: the common case has none).
COLL_REPRO_KERNEL bool needsFixing(const int64_t* acc, const uint32_t* flags, size_t m) {
  uint64_t any = 0;
  for (size_t i = 0; i < m; ++i) {
    const uint64_t a = static_cast<uint64_t>(acc[i]) + static_cast<uint64_t>(kExactDouble - 1);
    any |= flags[i] | static_cast<uint64_t>(a > static_cast<uint64_t>(2 * kExactDouble - 2));
  }
  return any != 0;
}

template <Narrow N>
void finishFloatBlock(void* out, size_t off, const int64_t* acc, const int32_t* emax,
                      const uint32_t* flags, size_t m, int divisor) {
  alignas(64) float r[kBlock];
  finishFloatLoop<N != Narrow::None>(r, acc, emax, m);
  if constexpr (N == Narrow::None) {
    if (divisor > 1)
      for (size_t i = 0; i < m; ++i) r[i] = static_cast<float>(static_cast<double>(r[i]) / divisor);
    std::memcpy(static_cast<float*>(out) + off, r, m * sizeof(float));
  } else {
    uint16_t* o = static_cast<uint16_t*>(out) + off;
    N == Narrow::Half ? floatToHalfN(o, r, m) : floatToBf16N(o, r, m);
    if (divisor > 1) {
      N == Narrow::Half ? halfToFloatN(r, o, m) : bf16ToFloatN(r, o, m);
      const float d = static_cast<float>(divisor);
      for (size_t i = 0; i < m; ++i) r[i] = r[i] / d;
      N == Narrow::Half ? floatToHalfN(o, r, m) : floatToBf16N(o, r, m);
    }
  }
  if (needsFixing(acc, flags, m))
    for (size_t i = 0; i < m; ++i)
      if (flags[i] || acc[i] >= kExactDouble || acc[i] <= -kExactDouble)
        finishFloatOne<N>(out, off + i, acc[i], emax[i], flags[i], divisor);
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define COLL_REPRO_AVX2 1
// Passes 1-3 for 8 elements at a time with the n values of each in registers: the
// exponent maximum, flags and integer sums never go through memory between ranks' values.
// The same operations as the portable loops, so the same bits.
// With `out` (float32 results), pass 4 too: the results go straight to out, and only the
// elements finishFloatLoop would not take (specials, sums of 2^53 or more) go through
// finishFloatOne; emax, flags and acc are then not written.
__attribute__((target("avx2"))) size_t floatPassesAvx2(int32_t* emax, uint32_t* flags, int64_t* acc,
                                                        const float* const* x, int n, size_t m,
                                                        float* out, int divisor) {
  const __m256i oddIdx = _mm256_setr_epi32(1, 3, 5, 7, 0, 0, 0, 0), evenIdx = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
  const __m256d two32 = _mm256_set1_pd(4294967296.0);
  const __m256i bigHi = _mm256_set1_epi32((1 << 21) - 1), bigLo = _mm256_set1_epi32(-(1 << 21));
  const __m256i backBias = _mm256_set1_epi64x(1023 - 126 - kFrac);
  const __m256d div = _mm256_set1_pd(divisor);
  const __m256i expMask = _mm256_set1_epi32(0xff), allOnes = _mm256_set1_epi32(0xff);
  const __m256i mantMask = _mm256_set1_epi32(0x7fffff), zero = _mm256_setzero_si256();
  const __m256i one = _mm256_set1_epi32(1), nanFlag = _mm256_set1_epi32(kNan);
  const __m256i bias = _mm256_set1_epi64x(1023 + kFrac + 126);
  const __m256d magic = _mm256_set1_pd(kMagic);
  const __m256i magicBits = _mm256_set1_epi64x(static_cast<long long>(__builtin_bit_cast(uint64_t, kMagic)));
  size_t i = 0;
  for (; i + 8 <= m; i += 8) {
    __m256i vmax = zero, vflags = zero;
    for (int p = 0; p < n; ++p) {
      const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[p] + i));
      const __m256i be = _mm256_and_si256(_mm256_srli_epi32(u, 23), expMask);
      const __m256i sp = _mm256_cmpeq_epi32(be, allOnes);
      vmax = _mm256_max_epi32(vmax, _mm256_andnot_si256(sp, be));
      const __m256i isNan = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_and_si256(u, mantMask), zero),
                                                _mm256_set1_epi32(-1));
      const __m256i inf = _mm256_add_epi32(_mm256_srli_epi32(u, 31), one);  // +Inf 1, -Inf 2
      const __m256i kind = _mm256_blendv_epi8(inf, nanFlag, isNan);
      vflags = _mm256_or_si256(vflags, _mm256_and_si256(sp, kind));
    }
    if (!out) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(emax + i), vmax);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(flags + i), vflags);
    }
    // scale = 2^(frac - (max(emax, 1) - 126)): exponent field 1023 + frac + 126 - max(emax, 1).
    const __m256i em = _mm256_max_epi32(vmax, one);
    const __m256i emLo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(em));
    const __m256i emHi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(em, 1));
    const __m256d scaleLo = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_sub_epi64(bias, emLo), 52));
    const __m256d scaleHi = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_sub_epi64(bias, emHi), 52));
    __m256i accLo = zero, accHi = zero;
    for (int p = 0; p < n; ++p) {
      const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[p] + i));
      const __m256i be = _mm256_and_si256(_mm256_srli_epi32(u, 23), expMask);
      const __m256i v = _mm256_andnot_si256(_mm256_cmpeq_epi32(be, allOnes), u);  // specials: 0
      const __m256 f = _mm256_castsi256_ps(v);
      const __m256d dLo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
      const __m256d dHi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
      const __m256d tLo = _mm256_add_pd(_mm256_mul_pd(dLo, scaleLo), magic);
      const __m256d tHi = _mm256_add_pd(_mm256_mul_pd(dHi, scaleHi), magic);
      accLo = _mm256_add_epi64(accLo, _mm256_sub_epi64(_mm256_castpd_si256(tLo), magicBits));
      accHi = _mm256_add_epi64(accHi, _mm256_sub_epi64(_mm256_castpd_si256(tHi), magicBits));
    }
    if (!out) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i), accLo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i + 4), accHi);
      continue;
    }
    // Pass 4 as finishFloatLoop: the sum's 32-bit halves convert exactly, their sum
    // rounds once (exactly below 2^53), the scaling by 2^(E - frac) is exact.
    const __m256i his = _mm256_permute2x128_si256(_mm256_permutevar8x32_epi32(accLo, oddIdx),
                                                  _mm256_permutevar8x32_epi32(accHi, oddIdx), 0x20);
    const __m256i los = _mm256_permute2x128_si256(_mm256_permutevar8x32_epi32(accLo, evenIdx),
                                                  _mm256_permutevar8x32_epi32(accHi, evenIdx), 0x20);
    // his: high halves (signed) of the 8 sums; los: low halves (unsigned).
    const __m256i big = _mm256_or_si256(_mm256_cmpgt_epi32(his, bigHi), _mm256_cmpgt_epi32(bigLo, his));
    const __m256i needSlow = _mm256_or_si256(big, _mm256_cmpgt_epi32(vflags, zero));
    __m256 r8;
    {
      __m128 halves[2];
      for (int h = 0; h < 2; ++h) {
        const __m128i hi32 = h ? _mm256_extracti128_si256(his, 1) : _mm256_castsi256_si128(his);
        const __m128i lo32 = h ? _mm256_extracti128_si256(los, 1) : _mm256_castsi256_si128(los);
        __m256d lo = _mm256_cvtepi32_pd(lo32);  // signed view: add 2^32 where negative
        lo = _mm256_add_pd(lo, _mm256_and_pd(_mm256_cmp_pd(lo, _mm256_setzero_pd(), _CMP_LT_OQ), two32));
        const __m256d d = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(hi32), two32), lo);
        const __m256i e = _mm256_cvtepi32_epi64(h ? _mm256_extracti128_si256(em, 1) : _mm256_castsi256_si128(em));
        const __m256d back = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(e, backBias), 52));
        __m128 f = _mm256_cvtpd_ps(_mm256_mul_pd(d, back));
        if (divisor > 1) f = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtps_pd(f), div));
        halves[h] = f;
      }
      r8 = _mm256_set_m128(halves[1], halves[0]);
    }
    _mm256_storeu_ps(out + i, r8);
    if (!_mm256_testz_si256(needSlow, needSlow)) {
      alignas(32) int64_t a[8];
      alignas(32) uint32_t fl[8];
      alignas(32) int32_t ex[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(ex), vmax);
      _mm256_store_si256(reinterpret_cast<__m256i*>(a), accLo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(a + 4), accHi);
      _mm256_store_si256(reinterpret_cast<__m256i*>(fl), vflags);
      for (int k = 0; k < 8; ++k)
        if (fl[k] || a[k] >= kExactDouble || a[k] <= -kExactDouble)
          finishFloatOne<Narrow::None>(out, i + k, a[k], ex[k], fl[k], divisor);
    }
  }
  return i;
}
bool haveAvx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#else
#define COLL_REPRO_AVX2 0
#endif

template <Narrow N>
void sumFloatSlices(void* out, const void* in, size_t stride, int n, size_t count, int divisor) {
  alignas(64) int32_t emax[kBlock];
  alignas(64) uint32_t flags[kBlock];
  alignas(64) double scale[kBlock];
  alignas(64) int64_t acc[kBlock];
  std::vector<float> wide;
  if constexpr (N != Narrow::None) wide.resize(static_cast<size_t>(n) * kBlock);
  // The ranks' values of the block (no allocation for small jobs: small calls are timed).
  const float* inlinePtrs[64];
  std::vector<const float*> heapPtrs(n > 64 ? static_cast<size_t>(n) : 0);
  const float** ptrs = n > 64 ? heapPtrs.data() : inlinePtrs;
  for (size_t off = 0; off < count; off += kBlock) {
    const size_t m = std::min(kBlock, count - off);
    auto values = [&](int p) -> const float* {
      if constexpr (N == Narrow::None) return static_cast<const float*>(in) + p * stride + off;
      else return wide.data() + static_cast<size_t>(p) * kBlock;
    };
    if constexpr (N != Narrow::None) {
      for (int p = 0; p < n; ++p) {
        const uint16_t* src = static_cast<const uint16_t*>(in) + p * stride + off;
        float* dst = wide.data() + static_cast<size_t>(p) * kBlock;
        if (N == Narrow::Half) halfToFloatN(dst, src, m);
        else bf16ToFloatN(dst, src, m);
      }
    }
    size_t done = 0;  // elements [0, done) summed by the AVX2 passes
#if COLL_REPRO_AVX2
    if (haveAvx2()) {
      for (int p = 0; p < n; ++p) ptrs[p] = values(p);
      if constexpr (N == Narrow::None) {
        float* o = static_cast<float*>(out) + off;
        done = floatPassesAvx2(emax, flags, acc, ptrs, n, m, o, divisor);
        if (done == m) continue;
        const size_t rest = m - done;
        std::fill_n(emax + done, rest, 0);
        std::fill_n(flags + done, rest, 0u);
        std::fill_n(acc + done, rest, int64_t{0});
        for (int p = 0; p < n; ++p) floatExponents(emax + done, flags + done, values(p) + done, rest);
        for (size_t i = done; i < m; ++i) scale[i] = pow2(kFrac - (std::max(emax[i], 1) - 126));
        for (int p = 0; p < n; ++p) floatAccumulate(acc + done, scale + done, values(p) + done, rest);
        finishFloatBlock<N>(out, off + done, acc + done, emax + done, flags + done, rest, divisor);
        continue;
      }
      done = floatPassesAvx2(emax, flags, acc, ptrs, n, m, nullptr, divisor);
    }
#endif
    const size_t rest = m - done;
    if (rest) {
      std::fill_n(emax + done, rest, 0);
      std::fill_n(flags + done, rest, 0u);
      std::fill_n(acc + done, rest, int64_t{0});
      for (int p = 0; p < n; ++p) floatExponents(emax + done, flags + done, values(p) + done, rest);
      for (size_t i = done; i < m; ++i) scale[i] = pow2(kFrac - (std::max(emax[i], 1) - 126));
      for (int p = 0; p < n; ++p) floatAccumulate(acc + done, scale + done, values(p) + done, rest);
    }
    finishFloatBlock<N>(out, off, acc, emax, flags, m, divisor);
  }
}

// ---------------------------------------------------------------- double

COLL_REPRO_KERNEL void doubleExponents(int32_t* emax, uint32_t* flags, const double* x, size_t m) {
  for (size_t i = 0; i < m; ++i) {
    const uint64_t u = __builtin_bit_cast(uint64_t, x[i]);
    const int32_t be = static_cast<int32_t>((u >> 52) & 0x7ffu);
    const bool sp = be == 0x7ff;
    const int32_t e = sp ? 0 : be;
    emax[i] = emax[i] > e ? emax[i] : e;
    const uint32_t kind = (u & 0xfffffffffffffull) ? kNan : ((u >> 63) ? kNegInf : kPosInf);
    flags[i] |= sp ? kind : 0u;
  }
}

COLL_REPRO_KERNEL void doubleAccumulate(int64_t* hi, int64_t* lo, const double* s1, const double* s2,
                                        const double* x, size_t m) {
  for (size_t i = 0; i < m; ++i) {
    const uint64_t u = __builtin_bit_cast(uint64_t, x[i]);
    const uint64_t keep = 0ull - static_cast<uint64_t>(((u >> 52) & 0x7ffu) != 0x7ffu);
    const double v = __builtin_bit_cast(double, u & keep);
    const double d = (v * s1[i]) * s2[i];
    const double t = d + kMagic;
    const double r = t - kMagic;  // d rounded to an integer
    const double rest = (d - r) * 0x1p50;  // exact: |d - r| <= 1/2
    hi[i] += static_cast<int64_t>(__builtin_bit_cast(uint64_t, t) - __builtin_bit_cast(uint64_t, kMagic));
    lo[i] += static_cast<int64_t>(__builtin_bit_cast(uint64_t, rest + kMagic) -
                                  __builtin_bit_cast(uint64_t, kMagic));
  }
}

void sumDoubleSlices(double* out, const double* in, size_t stride, int n, size_t count, int divisor) {
  alignas(64) int32_t emax[kBlock];
  alignas(64) uint32_t flags[kBlock];
  alignas(64) double s1[kBlock], s2[kBlock];
  alignas(64) int64_t hi[kBlock], lo[kBlock];
  for (size_t off = 0; off < count; off += kBlock) {
    const size_t m = std::min(kBlock, count - off);
    std::fill_n(emax, m, 0);
    std::fill_n(flags, m, 0u);
    std::fill_n(hi, m, int64_t{0});
    std::fill_n(lo, m, int64_t{0});
    for (int p = 0; p < n; ++p) doubleExponents(emax, flags, in + p * stride + off, m);
    for (size_t i = 0; i < m; ++i) {
      const int k = kFrac - (std::max(emax[i], 1) - 1022);  // in [-974, 1071]
      const int k1 = k / 2;
      s1[i] = pow2(k1);
      s2[i] = pow2(k - k1);
    }
    for (int p = 0; p < n; ++p) doubleAccumulate(hi, lo, s1, s2, in + p * stride + off, m);
    for (size_t i = 0; i < m; ++i) {
      double r;
      if (flags[i]) {
        r = static_cast<double>(specialFloat(flags[i]));
      } else {
        const int e = std::max(emax[i], 1) - 1022;
        const __int128 t = static_cast<__int128>(hi[i]) * (int64_t{1} << kFrac) + lo[i];
        const int j = e - 2 * kFrac;  // in [-1121, 924]
        const int j1 = j / 2;
        r = (static_cast<double>(t) * pow2(j1)) * pow2(j - j1);
      }
      if (divisor > 1) r = r / divisor;
      out[off + i] = r;
    }
  }
}

// ---------------------------------------------------------------- the collectives

constexpr int kSlotIn = 20, kSlotBlocks = 21, kSlotOut = 22;
// Calls whose whole input, from every rank, is at most this big all-gather it (one step).
constexpr size_t kAllGatherBytes = size_t{8} << 10;

OpArgs subOp(OpKind kind, const void* send, void* recv, size_t count, collDataType_t dt, int root = 0) {
  OpArgs s;
  s.kind = kind;
  s.sendbuf = send;
  s.recvbuf = recv;
  s.count = count;
  s.dtype = dt;
  s.op = collSum;
  s.root = root;
  return s;
}

}  // namespace

collRedOp_t integerPlainOp(collRedOp_t op) {
  if (op == collSumReproducible) return collSum;
  if (op == collAvgReproducible) return collAvg;
  return op;
}

bool runsReproducibly(const OpArgs& op, bool mode) {
  if (op.kind != OpKind::AllReduce && op.kind != OpKind::Reduce && op.kind != OpKind::ReduceScatter)
    return false;
  if (!isFloatType(op.dtype) || op.preMul) return false;
  if (op.op == collSumReproducible || op.op == collAvgReproducible) return true;
  return mode && (op.op == collSum || op.op == collAvg);
}

void reproSumSlices(void* out, const void* in, size_t stride, int nslices, size_t m,
                    collDataType_t dt, int divisor) {
  COLL_CHECK_ARG(nslices >= 1 && nslices <= kReproMaxRanks, "reproducible sum of ", nslices,
                 " inputs: from 1 to ", kReproMaxRanks, " are supported");
  if (m == 0) return;
  switch (dt) {
    case collFloat32: return sumFloatSlices<Narrow::None>(out, in, stride, nslices, m, divisor);
    case collFloat16: return sumFloatSlices<Narrow::Half>(out, in, stride, nslices, m, divisor);
    case collBfloat16: return sumFloatSlices<Narrow::Bf16>(out, in, stride, nslices, m, divisor);
    case collFloat64:
      return sumDoubleSlices(static_cast<double*>(out), static_cast<const double*>(in), stride, nslices, m, divisor);
    default:
      COLL_THROW(collInvalidArgument, "reproducible sum: ", typeName(dt),
                 " is not a floating type (float16, bfloat16, float32, float64)");
  }
}

void runReproducible(Team& team, const OpArgs& op, const std::function<void(const OpArgs&)>& runSub) {
  const int n = team.nranks(), me = team.rank();
  if (n > kReproMaxRanks)
    COLL_THROW(collInvalidUsage, "reproducible ", opName(op.op), " on ", n, " ranks: at most ",
               kReproMaxRanks, " are supported");
  const bool avg = op.op == collAvg || op.op == collAvgReproducible;
  const int divisor = avg ? n : 1;
  const collDataType_t dt = op.dtype;
  const size_t es = typeSize(dt);
  auto* recv = static_cast<char*>(op.recvbuf);

  if (op.kind == OpKind::ReduceScatter) {
    // Every rank's block of the result from every rank, then one sum: one step.
    void* blocks = team.scratch(op.count * n * es, kSlotBlocks);
    runSub(subOp(OpKind::AllToAll, op.sendbuf, blocks, op.count, dt));
    reproSumSlices(recv, blocks, op.count, n, op.count, dt, divisor);
    return;
  }

  const size_t count = op.count;
  const bool rooted = op.kind == OpKind::Reduce;
  const bool amRoot = !rooted || me == op.root;
  if (count * n * es <= kAllGatherBytes || n == 1) {
    void* all = amRoot ? team.scratch(count * n * es, kSlotBlocks) : nullptr;
    if (rooted) runSub(subOp(OpKind::Gather, op.sendbuf, all, count, dt, op.root));
    else runSub(subOp(OpKind::AllGather, op.sendbuf, all, count, dt));
    if (amRoot) reproSumSlices(recv, all, count, n, count, dt, divisor);
    return;
  }

  // Rank r adds block r (chunk elements; the last blocks may be short or empty).
  const size_t chunk = (count + n - 1) / n;
  const size_t padded = chunk * n;
  const bool exact = padded == count;
  const void* in = op.sendbuf;
  if (!exact) {
    auto* staged = static_cast<char*>(team.scratch(padded * es, kSlotIn));
    std::memcpy(staged, op.sendbuf, count * es);
    std::memset(staged + count * es, 0, (padded - count) * es);
    in = staged;
  }
  void* blocks = team.scratch(padded * es, kSlotBlocks);
  runSub(subOp(OpKind::AllToAll, in, blocks, chunk, dt));
  const size_t mineAt = chunk * me;
  const size_t mine = count > mineAt ? std::min(chunk, count - mineAt) : 0;
  // The assembled result: the output itself when the blocks tile it exactly.
  char* whole = nullptr;
  if (amRoot) whole = exact ? recv : static_cast<char*>(team.scratch(padded * es, kSlotOut));
  char* block = amRoot ? whole + mineAt * es : static_cast<char*>(team.scratch(chunk * es, kSlotOut));
  reproSumSlices(block, blocks, chunk, n, mine, dt, divisor);
  if (mine < chunk) std::memset(block + mine * es, 0, (chunk - mine) * es);
  if (rooted) runSub(subOp(OpKind::Gather, block, whole, chunk, dt, op.root));
  else runSub(subOp(OpKind::AllGather, block, whole, chunk, dt));
  if (amRoot && !exact) std::memcpy(recv, whole, count * es);
}

}  // namespace coll
