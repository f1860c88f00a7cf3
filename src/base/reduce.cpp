// Element-wise reduction kernels and float16/bfloat16 conversions.
//
// Speed: every hot loop is a plain template the compiler auto-vectorises. The optimize
// pragma comes before the includes so that the whole translation unit is optimised
// even in a debug build; the leaf loops are cloned for AVX2 with a run-time dispatch
// (target_clones), so one binary runs everywhere. Large out-of-place results are
// written with streaming stores (see produceInto). No -ffast-math: results must be
// IEEE-exact and identical on every machine.
//
// Determinism: ranks combine partial results in different orders (ring vs tree vs
// halving-doubling), so op(a, b) must equal op(b, a) bit for bit for every type and op:
//  - integer sum/prod wrap around modulo 2^bits (computed in the unsigned type, no UB);
//  - float sum/prod are IEEE-commutative except for which NaN payload survives, so any
//    NaN result is replaced by the canonical quiet NaN (sign clear, quiet bit only);
//  - float max/min propagate NaN (canonical NaN again) and order -0 below +0 (the
//    IEEE 754-2019 maximum/minimum rule), so max(-0, +0) is +0 in either order.
// float16/bfloat16 are widened to float, combined, and rounded back to nearest even.
// float's 24-bit significand is at least 2p+2 bits for both (p = 11 and 8), so for sum
// and prod this double rounding gives the correctly rounded 16-bit result.
//
// The portable conversions are integer bit manipulation: exact, vectorisable, and
// independent of the FPU rounding mode and of the DAZ/FTZ flags an application may set.
// Bulk float16 conversions use F16C where the CPU has it; the bits are the same (the
// tests compare the two), so mixed clusters still agree.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include "base/reduce.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

#include "base/config.hpp"
#include "base/error.hpp"
#include "base/types.hpp"

#if defined(__clang__)
#define COLL_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define COLL_IVDEP _Pragma("GCC ivdep")
#endif

// Helpers are forced inline: at -O0 the inliner does not run even for O3 functions.
#define COLL_INLINE inline __attribute__((always_inline))

// Run-time ISA dispatch needs GCC (clang 14 clones no templates and knows no "f16c");
// other compilers get the baseline vectorised loops and the portable conversions.
// Under ThreadSanitizer the loops are not cloned: the loader runs the clones' ifunc
// resolvers before the sanitizer's runtime is set up, and they crash.
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define COLL_X86_DISPATCH 1
#include <immintrin.h>
#ifndef __SANITIZE_THREAD__
#define COLL_KERNEL __attribute__((target_clones("avx2", "default")))
#endif
#else
#define COLL_X86_DISPATCH 0
#endif
#ifndef COLL_KERNEL
#define COLL_KERNEL
#endif

namespace coll {

COLL_PARAM(kStreamMin, "COLL_STREAM_MIN_BYTES", "8M",
           "out-of-place results at least this big are written past the cache (streaming stores); read once per process");

size_t streamMinBytes() {
  static const size_t v = [] {
    const char* e = getenv(kStreamMin);
    return parseSize(e && *e ? e : "8M", kStreamMin);
  }();
  return v;
}

namespace {

// ---------------------------------------------------------------- 16-bit float codecs

// Branch-free select; a plain ?: here can turn into control flow that stops the
// vectoriser (the float multiply below may not be speculated under -ftrapping-math).
COLL_INLINE uint32_t pick(bool c, uint32_t x, uint32_t y) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return (x & mask) | (y & ~mask);
}

COLL_INLINE float halfToFloatBits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  const uint32_t normal = ((exp + (127 - 15)) << 23) | (mant << 13);
  // Inf stays Inf; a NaN keeps its payload and is made quiet, as F16C does.
  const uint32_t special = 0x7f800000u | (mant << 13) | pick(mant != 0, 0x00400000u, 0u);
  // A half subnormal is mant * 2^-24: converting the integer and scaling is exact and
  // stays among normal floats, so DAZ/FTZ cannot touch it. (Signed conversion: AVX2
  // has no unsigned one.)
  const float scaled = static_cast<float>(static_cast<int32_t>(mant)) * 0x1p-24f;
  const uint32_t subnormal = __builtin_bit_cast(uint32_t, scaled);
  const uint32_t bits = pick(exp == 0x1f, special, pick(exp == 0, subnormal, normal));
  return __builtin_bit_cast(float, sign | bits);
}

COLL_INLINE uint16_t floatToHalfBits(float f) {
  const uint32_t x = __builtin_bit_cast(uint32_t, f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  // Normal range: rebias the exponent and round the 13 dropped bits to nearest even.
  // Values in [65520, 65536) carry into exponent 31, which is exactly Inf.
  const uint32_t rebased = a - ((127u - 15u) << 23);
  const uint32_t normal = (rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13;
  // Subnormal range (|f| < 2^-14): round(m * 2^(e-126)) to nearest even, with the
  // implicit bit made explicit. 126 - e wraps for larger e; the clamp to 31 keeps the
  // shift defined, and such a shift gives 0, which is right for tiny values.
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e < 31u ? 126u - e : 31u;
  const uint32_t sub = (m + ((1u << shift) >> 1) - 1u + ((m >> shift) & 1u)) >> shift;
  const uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  uint32_t bits = pick(a < 0x38800000u, sub, normal);
  bits = pick(a >= 0x47800000u, 0x7c00u, bits);  // overflow and Inf
  bits = pick(a > 0x7f800000u, nan, bits);
  return static_cast<uint16_t>(sign | bits);
}

COLL_INLINE float bf16ToFloatBits(uint16_t b) {
  return __builtin_bit_cast(float, static_cast<uint32_t>(b) << 16);
}

COLL_INLINE uint16_t floatToBf16Bits(float f) {
  const uint32_t x = __builtin_bit_cast(uint32_t, f);
  // Adding 0x7fff plus the kept LSB rounds to nearest even; a carry into the exponent
  // is the right answer (up to Inf). NaN is made quiet so it cannot round to Inf.
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x0040u;
  // Testing the float (not the bits) lets the vectoriser select before narrowing to 16
  // bits: about half the instructions.
  return static_cast<uint16_t>(f != f ? nan : rounded);
}

COLL_KERNEL void halfToFloatLoop(float* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = halfToFloatBits(src[i]);
}
COLL_KERNEL void floatToHalfLoop(uint16_t* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = floatToHalfBits(src[i]);
}
COLL_KERNEL void bf16ToFloatLoop(float* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16ToFloatBits(src[i]);
}
COLL_KERNEL void floatToBf16Loop(uint16_t* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = floatToBf16Bits(src[i]);
}

// ---------------------------------------------------------------- x86 specifics

#if COLL_X86_DISPATCH
// F16C converts 8 values per instruction, several times faster than the portable bit
// manipulation, and gives the same bits (NaN payloads, subnormals, and it ignores
// FTZ/DAZ as the integer code does); the tail uses the portable code.
bool haveF16c() { return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx"); }

__attribute__((target("avx,f16c"))) void halfToFloatF16c(float* dst, const uint16_t* src,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = halfToFloatBits(src[i]);
}

__attribute__((target("avx,f16c"))) void floatToHalfF16c(uint16_t* dst, const float* src,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = floatToHalfBits(src[i]);
}

void halfToFloatFast(float* d, const uint16_t* s, size_t n) {
  haveF16c() ? halfToFloatF16c(d, s, n) : halfToFloatLoop(d, s, n);
}
void floatToHalfFast(uint16_t* d, const float* s, size_t n) {
  haveF16c() ? floatToHalfF16c(d, s, n) : floatToHalfLoop(d, s, n);
}

// Non-temporal stores for results too big to stay in cache: a normal store first reads
// the line it writes (read-for-ownership), so out-of-place a+b moves 4 bytes per byte
// written instead of 3. Measured on 64 MiB float sums here: 25-35% faster. dst is
// 32-byte aligned by the caller; src may be unaligned (copyStreaming).
constexpr bool kCanStream = true;
__attribute__((target("avx"))) void streamAvx(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  for (size_t i = 0; i < bytes; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), v);
  }
}
void streamSse2(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  for (size_t i = 0; i < bytes; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), v);
  }
}
void streamStore(void* dst, const void* src, size_t bytes) {
  __builtin_cpu_supports("avx") ? streamAvx(dst, src, bytes) : streamSse2(dst, src, bytes);
}
// Streaming stores are weakly ordered: fence before anyone (a peer polling a flag in
// shared memory) may be told the result is there.
void streamFence() { _mm_sfence(); }
#else
void halfToFloatFast(float* d, const uint16_t* s, size_t n) { halfToFloatLoop(d, s, n); }
void floatToHalfFast(uint16_t* d, const float* s, size_t n) { floatToHalfLoop(d, s, n); }
constexpr bool kCanStream = false;
void streamStore(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void streamFence() {}
#endif

struct HalfCodec {
  static void widen(float* d, const uint16_t* s, size_t n) { halfToFloatFast(d, s, n); }
  static void narrow(uint16_t* d, const float* s, size_t n) { floatToHalfFast(d, s, n); }
};
struct Bf16Codec {
  static void widen(float* d, const uint16_t* s, size_t n) { bf16ToFloatLoop(d, s, n); }
  static void narrow(uint16_t* d, const float* s, size_t n) { floatToBf16Loop(d, s, n); }
};

// ---------------------------------------------------------------- operations

template <typename F>
using SameSizeInt = std::conditional_t<sizeof(F) == 4, int32_t, int64_t>;

// The canonical NaN: quiet, positive, no payload (0x7fc00000 for float).
template <typename F>
constexpr F kQuietNan = std::numeric_limits<F>::quiet_NaN();

template <typename F>
COLL_INLINE F canonicalNan(F r) {
  return r != r ? kQuietNan<F> : r;
}

// A signed integer that orders floats totally, -0 just below +0: negative floats have
// their magnitude bits flipped so that a larger magnitude compares smaller.
template <typename F>
COLL_INLINE SameSizeInt<F> orderKey(F x) {
  using S = SameSizeInt<F>;
  using U = std::make_unsigned_t<S>;
  const S s = __builtin_bit_cast(S, x);
  return s ^ static_cast<S>(static_cast<U>(s >> (8 * sizeof(S) - 1)) >> 1);
}

template <typename T>
COLL_INLINE T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
COLL_INLINE T wrapMul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

struct SumOp {
  template <typename T>
  COLL_INLINE static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return canonicalNan(a + b);
    else return wrapAdd(a, b);
  }
};
struct ProdOp {
  template <typename T>
  COLL_INLINE static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return canonicalNan(a * b);
    else return wrapMul(a, b);
  }
};
struct MaxOp {
  template <typename T>
  COLL_INLINE static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      const T r = orderKey(a) > orderKey(b) ? a : b;
      return ((a != a) | (b != b)) ? kQuietNan<T> : r;
    } else {
      return a > b ? a : b;
    }
  }
};
struct MinOp {
  template <typename T>
  COLL_INLINE static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      const T r = orderKey(a) < orderKey(b) ? a : b;
      return ((a != a) | (b != b)) ? kQuietNan<T> : r;
    } else {
      return a < b ? a : b;
    }
  }
};

// Bitwise ops: integer types only (the API edge refuses them on floats).
struct BandOp {
  template <typename T>
  COLL_INLINE static T apply(T a, T b) { return static_cast<T>(a & b); }
};
struct BorOp {
  template <typename T>
  COLL_INLINE static T apply(T a, T b) { return static_cast<T>(a | b); }
};
struct BxorOp {
  template <typename T>
  COLL_INLINE static T apply(T a, T b) { return static_cast<T>(a ^ b); }
};

// ---------------------------------------------------------------- loops

// ivdep: dst may be a or b exactly, a dependence distance of 0 that is never
// loop-carried, and partial overlap is rejected up front; so the run-time overlap check
// and the scalar copy of every loop that the compiler would otherwise add are dead weight.
template <typename T, typename Op>
COLL_KERNEL void combineLoop(T* dst, const T* a, const T* b, size_t n) {
  COLL_IVDEP
  for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(a[i], b[i]);
}

// Streamed results are produced into an L1 scratch block first (1 KiB measured best).
constexpr size_t kStreamBlockBytes = 1024;

bool shouldStream(const void* dst, const void* a, const void* b, size_t bytes, size_t elem) {
  return kCanStream && bytes >= streamMinBytes() && dst != a && dst != b &&
         reinterpret_cast<uintptr_t>(dst) % elem == 0;
}

// Calls produce(out, off, m) over [0, n) in pieces of at most maxBlock elements, out
// receiving elements off..off+m-1: dst + off, or when streaming an aligned scratch
// block that is then streamed to dst + off (dst first brought to 64-byte alignment).
template <typename T, typename Produce>
void produceInto(T* dst, size_t n, size_t maxBlock, bool stream, const Produce& produce) {
  size_t off = 0;
  auto direct = [&](size_t end) {
    while (off < end) {
      const size_t m = std::min(maxBlock, end - off);
      produce(dst + off, off, m);
      off += m;
    }
  };
  if (stream) {
    constexpr size_t kPer = kStreamBlockBytes / sizeof(T);
    direct(std::min(n, ((0 - reinterpret_cast<uintptr_t>(dst)) & 63) / sizeof(T)));
    alignas(64) T scratch[kPer];
    for (; n - off >= kPer; off += kPer) {
      produce(scratch, off, kPer);
      streamStore(dst + off, scratch, kStreamBlockBytes);
    }
    streamFence();
  }
  direct(n);
}

template <typename T, typename Op>
void combine(T* dst, const T* a, const T* b, size_t n, bool stream) {
  produceInto(dst, n, SIZE_MAX, stream, [&](T* out, size_t off, size_t m) {
    combineLoop<T, Op>(out, a + off, b + off, m);
  });
}

// 16-bit floats go through float in blocks small enough to stay in L1; a block of a and
// b is read completely before the same block of dst is written, so aliasing is safe.
constexpr size_t kBlock = 1024;
static_assert(kStreamBlockBytes / sizeof(uint16_t) <= kBlock);

template <typename Op, typename Codec>
void combine16(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n, bool stream) {
  alignas(64) float fa[kBlock];
  alignas(64) float fb[kBlock];
  produceInto(dst, n, kBlock, stream, [&](uint16_t* out, size_t off, size_t m) {
    Codec::widen(fa, a + off, m);
    Codec::widen(fb, b + off, m);
    combineLoop<float, Op>(fa, fa, fb, m);
    Codec::narrow(out, fa, m);
  });
}

// bfloat16 widens with a shift and narrows with a few integer ops, so one fused loop
// (no scratch blocks) vectorises well; float16 without F16C would not, hence combine16.
template <typename Op>
struct OnBf16 {
  COLL_INLINE static uint16_t apply(uint16_t a, uint16_t b) {
    return floatToBf16Bits(Op::apply(bf16ToFloatBits(a), bf16ToFloatBits(b)));
  }
};
template <typename Op>
using AsIs = Op;

template <typename T, template <typename> class On = AsIs>
void reduceTyped(void* dst, const void* a, const void* b, size_t n, collRedOp_t op,
                 bool stream) {
  auto* d = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  switch (op) {
    case collSum: case collAvg: return combine<T, On<SumOp>>(d, x, y, n, stream);
    case collProd: return combine<T, On<ProdOp>>(d, x, y, n, stream);
    case collMax: return combine<T, On<MaxOp>>(d, x, y, n, stream);
    case collMin: return combine<T, On<MinOp>>(d, x, y, n, stream);
    case collBand: case collBor: case collBxor:
      if constexpr (std::is_integral_v<T> && std::is_same_v<On<SumOp>, SumOp>) {
        if (op == collBand) return combine<T, BandOp>(d, x, y, n, stream);
        if (op == collBor) return combine<T, BorOp>(d, x, y, n, stream);
        return combine<T, BxorOp>(d, x, y, n, stream);
      }
      [[fallthrough]];
    default: COLL_THROW(collInvalidArgument, "reduceBuffers: invalid op ", static_cast<int>(op), " for this type");
  }
}

template <typename Codec>
void reduce16(void* dst, const void* a, const void* b, size_t n, collRedOp_t op, bool stream) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  switch (op) {
    case collSum: case collAvg: return combine16<SumOp, Codec>(d, x, y, n, stream);
    case collProd: return combine16<ProdOp, Codec>(d, x, y, n, stream);
    case collMax: return combine16<MaxOp, Codec>(d, x, y, n, stream);
    case collMin: return combine16<MinOp, Codec>(d, x, y, n, stream);
    default: COLL_THROW(collInvalidArgument, "reduceBuffers: invalid op ", static_cast<int>(op), " for this type");
  }
}

// ---------------------------------------------------------------- average

template <typename T>
COLL_KERNEL void divideLoop(T* buf, size_t n, int divisor) {
  if constexpr (std::is_floating_point_v<T>) {
    // A power of two has an exact reciprocal, and x * (1/d) then rounds the same real
    // number as x / d: the same bits, at a multiply's cost (a float divide is several
    // times slower: 15-20 us of an 85-90 us 2-rank average of 800 KB).
    if ((divisor & (divisor - 1)) == 0) {
      const T r = T(1) / static_cast<T>(divisor);
      for (size_t i = 0; i < n; ++i) buf[i] = buf[i] * r;
      return;
    }
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) buf[i] = buf[i] / d;
  } else if constexpr (sizeof(T) <= 4) {
    // No SIMD integer division exists; double division vectorises and is exact here:
    // |x| < 2^32, so x/n is never within 2^-53 relative of an integer it is not, and
    // truncating the rounded quotient equals truncating division.
    const double d = divisor;
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<T>(static_cast<double>(buf[i]) / d);
  } else {
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) buf[i] = buf[i] / d;
  }
}

template <typename Codec>
void divide16(uint16_t* buf, size_t n, int divisor) {
  alignas(64) float tmp[kBlock];
  for (size_t off = 0; off < n; off += kBlock) {
    const size_t m = std::min(kBlock, n - off);
    Codec::widen(tmp, buf + off, m);
    divideLoop<float>(tmp, m, divisor);
    Codec::narrow(buf + off, tmp, m);
  }
}

bool partialOverlap(const void* p, const void* q, size_t bytes) {
  auto x = reinterpret_cast<uintptr_t>(p);
  auto y = reinterpret_cast<uintptr_t>(q);
  return x != y && x < y + bytes && y < x + bytes;
}

}  // namespace

void reduceBuffers(void* dst, const void* a, const void* b, size_t count, collDataType_t dt,
                   collRedOp_t op) {
  COLL_CHECK_ARG(validType(dt), "reduceBuffers: invalid datatype ", static_cast<int>(dt));
  COLL_CHECK_ARG(validOp(op), "reduceBuffers: invalid op ", static_cast<int>(op));
  if (count == 0) return;
  COLL_CHECK_ARG(dst && a && b, "reduceBuffers: null buffer (dst = ", dst, ", a = ", a,
                 ", b = ", b, ", count = ", count, ")");
  const size_t bytes = count * typeSize(dt);
  COLL_CHECK_ARG(!partialOverlap(dst, a, bytes) && !partialOverlap(dst, b, bytes),
                 "reduceBuffers: dst ", dst, " partially overlaps a ", a, " or b ", b,
                 " (", bytes, " bytes); only exact aliasing is allowed");
  const bool s = shouldStream(dst, a, b, bytes, typeSize(dt));
  switch (dt) {
    case collInt8: return reduceTyped<int8_t>(dst, a, b, count, op, s);
    case collUint8: return reduceTyped<uint8_t>(dst, a, b, count, op, s);
    case collInt32: return reduceTyped<int32_t>(dst, a, b, count, op, s);
    case collUint32: return reduceTyped<uint32_t>(dst, a, b, count, op, s);
    case collInt64: return reduceTyped<int64_t>(dst, a, b, count, op, s);
    case collUint64: return reduceTyped<uint64_t>(dst, a, b, count, op, s);
    case collFloat16: return reduce16<HalfCodec>(dst, a, b, count, op, s);
    case collFloat32: return reduceTyped<float>(dst, a, b, count, op, s);
    case collFloat64: return reduceTyped<double>(dst, a, b, count, op, s);
    case collBfloat16: return reduceTyped<uint16_t, OnBf16>(dst, a, b, count, op, s);
    case collInt16: return reduceTyped<int16_t>(dst, a, b, count, op, s);
    case collUint16: return reduceTyped<uint16_t>(dst, a, b, count, op, s);
    default: break;
  }
}

void finishAverage(void* buf, size_t count, collDataType_t dt, int n) {
  COLL_CHECK_ARG(validType(dt), "finishAverage: invalid datatype ", static_cast<int>(dt));
  COLL_CHECK_ARG(n > 0, "finishAverage: n must be positive, got ", n);
  if (count == 0 || n == 1) return;
  COLL_CHECK_ARG(buf, "finishAverage: null buffer with count = ", count);
  switch (dt) {
    case collInt8: return divideLoop(static_cast<int8_t*>(buf), count, n);
    case collUint8: return divideLoop(static_cast<uint8_t*>(buf), count, n);
    case collInt32: return divideLoop(static_cast<int32_t*>(buf), count, n);
    case collUint32: return divideLoop(static_cast<uint32_t*>(buf), count, n);
    case collInt64: return divideLoop(static_cast<int64_t*>(buf), count, n);
    case collUint64: return divideLoop(static_cast<uint64_t*>(buf), count, n);
    case collFloat16: return divide16<HalfCodec>(static_cast<uint16_t*>(buf), count, n);
    case collFloat32: return divideLoop(static_cast<float*>(buf), count, n);
    case collFloat64: return divideLoop(static_cast<double*>(buf), count, n);
    case collBfloat16: return divide16<Bf16Codec>(static_cast<uint16_t*>(buf), count, n);
    case collInt16: return divideLoop(static_cast<int16_t*>(buf), count, n);
    case collUint16: return divideLoop(static_cast<uint16_t*>(buf), count, n);
    default: break;
  }
}

float halfToFloat(uint16_t h) { return halfToFloatBits(h); }
uint16_t floatToHalf(float f) { return floatToHalfBits(f); }
float bf16ToFloat(uint16_t b) { return bf16ToFloatBits(b); }
uint16_t floatToBf16(float f) { return floatToBf16Bits(f); }

void floatToHalfN(uint16_t* dst, const float* src, size_t n) { floatToHalfFast(dst, src, n); }
void halfToFloatN(float* dst, const uint16_t* src, size_t n) { halfToFloatFast(dst, src, n); }
void floatToBf16N(uint16_t* dst, const float* src, size_t n) { floatToBf16Loop(dst, src, n); }
void bf16ToFloatN(float* dst, const uint16_t* src, size_t n) { bf16ToFloatLoop(dst, src, n); }

void copyStreaming(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  const size_t head = std::min(bytes, static_cast<size_t>((0 - reinterpret_cast<uintptr_t>(d)) & 63));
  std::memcpy(d, s, head);
  const size_t body = (bytes - head) & ~size_t{63};
  if (body) {
    streamStore(d + head, s + head, body);
    streamFence();
  }
  std::memcpy(d + head + body, s + head + body, bytes - head - body);
}

}  // namespace coll
