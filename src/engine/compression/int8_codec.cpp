// Int8 block quantization: each block of B elements carries one float scale
// (max |x| / 127) followed by B signed bytes. Stochastic rounding (floor(x/scale + u),
// u uniform in [0,1)) is unbiased, so errors average out over ranks and steps; nearest
// rounding (here: half rounds up) has half the worst-case error but is biased per element.
#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "base/error.hpp"
#include "engine/compression/codec.hpp"

namespace coll::engine {
namespace {

// Run-time ISA dispatch (GCC on x86): decoding vectorises much wider with AVX2; encoding
// has a hand-written AVX2 kernel (the clamp and the narrowing to bytes defeat the
// auto-vectoriser) chosen at run time. Both compute every value with the same rounded
// operations in the same order, so their output is identical bit for bit.
// Not cloned under ThreadSanitizer, whose runtime is not up when the loader runs the
// clones' ifunc resolvers.
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#ifndef __SANITIZE_THREAD__
#define COLL_INT8_KERNEL __attribute__((target_clones("avx2", "default")))
#endif
#define COLL_INT8_AVX2 1
#endif
#ifndef COLL_INT8_KERNEL
#define COLL_INT8_KERNEL
#endif

// A stateless mix (lowbias32): independent uniform bits per element without a serial
// dependency between elements.
inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The bit pattern of max |x_i|. Patterns of non-negative floats order like the floats,
// and every infinity or NaN compares above every finite value (>= kNonFinite).
constexpr uint32_t kNonFinite = 0x7f800000u;
// The bit pattern of the smallest max |x| for which 127 / max is finite in float.
constexpr uint32_t kSmallestScalable = 0x02fe0001u;

uint32_t maxAbsBitsScalar(const float* x, size_t m) {
  uint32_t r = 0;
  for (size_t i = 0; i < m; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, sizeof b);
    b &= 0x7fffffffu;
    r = b > r ? b : r;
  }
  return r;
}

// q = floor(x * inv + u) clamped to [-127, 127], u uniform in [0, 1) from the hash of
// (seed + k) when stochastic, else 0.5 (nearest, half up); rt (if not null) = q * scale.
// The floor is a truncation of the value shifted by 128 (positive there), as vector
// conversions truncate; the shift rounds like the vector code does.
void quantizeScalar(const float* x, size_t from, size_t m, float inv, float scale, bool stochastic,
                    uint32_t seed, int8_t* q, float* rt) {
  for (size_t k = from; k < m; ++k) {
    float u = stochastic ? static_cast<float>(hash32(seed + static_cast<uint32_t>(k)) >> 8) * (1.0f / 16777216.0f)
                         : 0.5f;
    float v = x[k] * inv;
    float s = (v + u) + 128.0f;
    s = s < 1.0f ? 1.0f : (s > 255.0f ? 255.0f : s);
    int32_t qi = static_cast<int32_t>(s) - 128;
    q[k] = static_cast<int8_t>(qi);
    if (rt) rt[k] = static_cast<float>(qi) * scale;
  }
}

#if defined(COLL_INT8_AVX2)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
__attribute__((target("avx2"))) uint32_t maxAbsBitsAvx2(const float* x, size_t m) {
  const __m256i mask = _mm256_set1_epi32(0x7fffffff);
  __m256i acc = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 8 <= m; i += 8) {
    __m256i b = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), mask);
    acc = _mm256_max_epu32(acc, b);
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  uint32_t r = maxAbsBitsScalar(x + i, m - i);
  for (uint32_t l : lanes) r = l > r ? l : r;
  return r;
}

__attribute__((target("avx2"))) void quantizeAvx2(const float* x, size_t m, float inv, float scale,
                                                  bool stochastic, uint32_t seed, int8_t* q, float* rt) {
  const __m256 vinv = _mm256_set1_ps(inv), vscale = _mm256_set1_ps(scale), shift = _mm256_set1_ps(128.0f),
               lo = _mm256_set1_ps(1.0f), hi = _mm256_set1_ps(255.0f), half = _mm256_set1_ps(0.5f),
               unit = _mm256_set1_ps(1.0f / 16777216.0f);
  const __m256i c128 = _mm256_set1_epi32(128), lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                m1 = _mm256_set1_epi32(0x7feb352d), m2 = _mm256_set1_epi32(static_cast<int>(0x846ca68bu)),
                order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  size_t k = 0;
  for (; k + 32 <= m; k += 32) {
    __m256i qi[4];
    for (int j = 0; j < 4; ++j) {
      const size_t b = k + 8 * static_cast<size_t>(j);
      __m256 u = half;
      if (stochastic) {
        __m256i h = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(seed + static_cast<uint32_t>(b))), lane);
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
        h = _mm256_mullo_epi32(h, m1);
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 15));
        h = _mm256_mullo_epi32(h, m2);
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
        u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), unit);
      }
      __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + b), vinv);
      __m256 s = _mm256_add_ps(_mm256_add_ps(v, u), shift);
      s = _mm256_min_ps(_mm256_max_ps(s, lo), hi);
      qi[j] = _mm256_sub_epi32(_mm256_cvttps_epi32(s), c128);
      if (rt) _mm256_storeu_ps(rt + b, _mm256_mul_ps(_mm256_cvtepi32_ps(qi[j]), vscale));
    }
    // In range already: the saturating packs only narrow; the permute undoes their
    // 128-bit lane interleave.
    __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + k), _mm256_permutevar8x32_epi32(w, order));
  }
  quantizeScalar(x, k, m, inv, scale, stochastic, seed, q, rt);
}
#pragma GCC pop_options

// Asked on first use, not in a static initialiser, which may run before libgcc has
// read the CPU's features.
bool haveAvx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

uint32_t maxAbsBits(const float* x, size_t m) {
#if defined(COLL_INT8_AVX2)
  if (haveAvx2()) return maxAbsBitsAvx2(x, m);
#endif
  return maxAbsBitsScalar(x, m);
}

void quantize(const float* x, size_t m, float inv, float scale, bool stochastic, uint32_t seed, int8_t* q,
              float* rt) {
#if defined(COLL_INT8_AVX2)
  if (haveAvx2()) return quantizeAvx2(x, m, inv, scale, stochastic, seed, q, rt);
#endif
  quantizeScalar(x, 0, m, inv, scale, stochastic, seed, q, rt);
}

COLL_INT8_KERNEL void dequantize(const int8_t* q, size_t m, float scale, float* out) {
  for (size_t k = 0; k < m; ++k) out[k] = static_cast<float>(q[k]) * scale;
}

COLL_INT8_KERNEL void dequantizeAdd(const int8_t* q, size_t m, float scale, float* acc) {
  for (size_t k = 0; k < m; ++k) acc[k] += static_cast<float>(q[k]) * scale;
}


class Int8Codec final : public DenseCodec {
 public:
  Int8Codec(size_t block, bool stochastic) : block_(block), stochastic_(stochastic) {}
  size_t alignment() const override { return block_; }
  size_t encodedBytes(size_t n) const override {
    return (n + block_ - 1) / block_ * sizeof(float) + n;
  }

  void encode(const float* src, size_t n, uint8_t* dst, float* roundtrip, Rng& rng) const override {
    for (size_t off = 0; off < n; off += block_) {
      size_t m = n - off < block_ ? n - off : block_;
      dst = encodeBlock(src + off, m, dst, roundtrip ? roundtrip + off : nullptr, rng);
    }
  }

  void decode(const uint8_t* src, size_t n, float* dst) const override {
    for (size_t off = 0; off < n; off += block_) {
      size_t m = n - off < block_ ? n - off : block_;
      float scale;
      std::memcpy(&scale, src, sizeof(float));
      dequantize(reinterpret_cast<const int8_t*>(src + sizeof(float)), m, scale, dst + off);
      src += sizeof(float) + m;
    }
  }

  void decodeAdd(const uint8_t* src, size_t n, float* acc) const override {
    for (size_t off = 0; off < n; off += block_) {
      size_t m = n - off < block_ ? n - off : block_;
      float scale;
      std::memcpy(&scale, src, sizeof(float));
      dequantizeAdd(reinterpret_cast<const int8_t*>(src + sizeof(float)), m, scale, acc + off);
      src += sizeof(float) + m;
    }
  }

 private:
  uint8_t* encodeBlock(const float* x, size_t m, uint8_t* dst, float* rt, Rng& rng) const {
    const uint32_t seed = stochastic_ ? rng.next() : 0;
    const uint32_t bits = maxAbsBits(x, m);
    auto* q = reinterpret_cast<int8_t*>(dst + sizeof(float));
    // A block with an infinity or NaN cannot be scaled: it is sent as zeros (and owed in
    // full), so every other block stays usable. So is a block whose largest magnitude is
    // below 127 / FLT_MAX (about 3.7e-37): 127 / max would be infinite, and every zero of
    // the block would quantize (0 * inf = NaN) to -127 or -128.
    if (bits == 0 || bits >= kNonFinite || bits < kSmallestScalable) {
      const float zero = 0.0f;
      std::memcpy(dst, &zero, sizeof(float));
      std::memset(q, 0, m);
      if (rt) std::fill(rt, rt + m, 0.0f);
      return dst + sizeof(float) + m;
    }
    float mx;
    std::memcpy(&mx, &bits, sizeof mx);
    const float scale = mx / 127.0f;
    std::memcpy(dst, &scale, sizeof(float));
    quantize(x, m, 127.0f / mx, scale, stochastic_, seed, q, rt);
    return dst + sizeof(float) + m;
  }

  size_t block_;
  bool stochastic_;
};

}  // namespace

std::unique_ptr<DenseCodec> makeInt8Codec(const CompressionSpec& spec) {
  COLL_CHECK_ARG(spec.blockSize > 0, "int8 compression: block_size = ", spec.blockSize,
                 " must be positive");
  return std::make_unique<Int8Codec>(static_cast<size_t>(spec.blockSize), spec.stochastic);
}

}  // namespace coll::engine
