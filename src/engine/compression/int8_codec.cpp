// Int8 block quantization: each block of B elements carries one float scale
// (max |x| / 127) followed by B signed bytes. Stochastic rounding (floor(x/scale + u),
// u uniform in [0,1)) is unbiased, so errors average out over ranks and steps; nearest
// rounding (here: half rounds up) has half the worst-case error but is biased per element.
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "engine/compression/codec.hpp"

namespace coll::engine {
namespace {

// Run-time ISA dispatch (GCC on x86): the loops below vectorise much wider with AVX2,
// and the 32-bit multiplies of the hash have no SSE2 instruction at all.
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define COLL_INT8_KERNEL __attribute__((target_clones("avx2", "default")))
#else
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

// floor(v) for v in about [-127, 128], clamped to [-127, 127]: shifting by 128 keeps the
// value positive, where truncation (a vector instruction) equals floor (a libm call
// without SSE4.1).
inline int8_t quantize(float v) {
  float s = v + 128.0f;
  s = s < 1.0f ? 1.0f : (s > 255.0f ? 255.0f : s);
  return static_cast<int8_t>(static_cast<int32_t>(s) - 128);
}

COLL_INT8_KERNEL float maxAbs(const float* x, size_t m) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= m; i += 8)
    for (int j = 0; j < 8; ++j) {
      float a = std::fabs(x[i + j]);
      lanes[j] = a > lanes[j] ? a : lanes[j];
    }
  float r = 0;
  for (; i < m; ++i) r = std::fmax(r, std::fabs(x[i]));
  for (float l : lanes) r = std::fmax(r, l);
  return r;
}

COLL_INT8_KERNEL void quantizeStochastic(const float* x, size_t m, float inv, uint32_t seed, int8_t* q) {
  for (size_t k = 0; k < m; ++k) {
    float u = static_cast<float>(hash32(seed + static_cast<uint32_t>(k)) >> 8) * (1.0f / 16777216.0f);
    q[k] = quantize(x[k] * inv + u);
  }
}

COLL_INT8_KERNEL void quantizeNearest(const float* x, size_t m, float inv, int8_t* q) {
  for (size_t k = 0; k < m; ++k) q[k] = quantize(x[k] * inv + 0.5f);
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
    float mx = maxAbs(x, m);
    // A non-finite block cannot be scaled; sending zeros keeps every other block usable.
    float scale = std::isfinite(mx) && mx > 0 ? mx / 127.0f : 0.0f;
    float inv = scale > 0 ? 127.0f / mx : 0.0f;
    std::memcpy(dst, &scale, sizeof(float));
    auto* q = reinterpret_cast<int8_t*>(dst + sizeof(float));
    if (stochastic_) quantizeStochastic(x, m, inv, rng.next(), q);
    else quantizeNearest(x, m, inv, q);
    if (rt) dequantize(q, m, scale, rt);
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
