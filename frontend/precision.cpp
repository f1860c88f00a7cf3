#include "precision.hpp"

#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "blas.hpp"
#include "base/error.hpp"

namespace collective::frontend {

Precision parsePrecision(const std::string& name) {
  if (name == "fp32") return Precision::Float32;
  if (name == "bf16") return Precision::BFloat16;
  if (name == "fp16") return Precision::Float16;
  COLL_THROW(collInvalidArgument, "--precision: '", name, "', expected fp32|bf16|fp16");
}

const char* precisionName(Precision p) {
  switch (p) {
    case Precision::Float32:
      return "fp32";
    case Precision::BFloat16:
      return "bf16";
    case Precision::Float16:
      return "fp16";
  }
  return "?";
}

collDataType_t precisionType(Precision p) {
  switch (p) {
    case Precision::BFloat16:
      return collBfloat16;
    case Precision::Float16:
      return collFloat16;
    default:
      return collFloat32;
  }
}

size_t precisionBytes(Precision p) { return p == Precision::Float32 ? 4 : 2; }

namespace {

uint32_t bitsOf(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

float floatOf(uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

}  // namespace

uint16_t floatToBf16(float v) {
  const uint32_t u = bitsOf(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float bf16ToFloat(uint16_t h) { return floatOf(static_cast<uint32_t>(h) << 16); }

uint16_t floatToFp16(float v) {
  const uint32_t u = bitsOf(v);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {
    // Subnormal or zero in float16: value / 2^-24, rounded to nearest even.
    const float scaled = floatOf(a) * 16777216.0f;  // exact: multiplies by 2^24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent (127 -> 15), round the 23-bit mantissa to 10 bits.
  const uint32_t rounding = 0xfffu + ((a >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((a - 0x38000000u + rounding) >> 13));
}

float fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return floatOf(sign | 0x7f800000u | (mant << 13));
  return floatOf(sign | ((exp + 112u) << 23) | (mant << 13));
}

namespace {

// bf16 rounding without branches (NaN kept quiet by a select), so the loop vectorises.
[[gnu::always_inline]] inline uint32_t roundBf16Bits(uint32_t u) {
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return nan ? (u | 0x00400000u) & 0xffff0000u : rounded;
}

FRONTEND_VECTOR_CLONES
void roundBf16(float* data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, data + i, 4);
    u = roundBf16Bits(u);
    std::memcpy(data + i, &u, 4);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// The F16C conversions round to nearest even, as floatToFp16 does.
__attribute__((target("f16c,avx"))) void roundFp16F16c(float* data, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(data + i);
    _mm256_storeu_ps(data + i, _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
  }
  for (; i < n; ++i) data[i] = fp16ToFloat(floatToFp16(data[i]));
}
__attribute__((target("f16c,avx"))) void toFp16F16c(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = floatToFp16(in[i]);
}
__attribute__((target("f16c,avx"))) void fromFp16F16c(const uint16_t* in, float* out, int64_t n,
                                                      float scale) {
  int64_t i = 0;
  const __m256 s = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(
                                                reinterpret_cast<const __m128i*>(in + i))),
                                            s));
  for (; i < n; ++i) out[i] = fp16ToFloat(in[i]) * scale;
}
const bool kHaveF16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#else
void toFp16F16c(const float*, uint16_t*, int64_t) {}
void fromFp16F16c(const uint16_t*, float*, int64_t, float) {}
const bool kHaveF16c = false;
void roundFp16F16c(float* data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) data[i] = fp16ToFloat(floatToFp16(data[i]));
}
#endif

}  // namespace

void roundInPlace(Precision p, float* data, int64_t n) {
  if (p == Precision::BFloat16) {
    roundBf16(data, n);
  } else if (p == Precision::Float16) {
    if (kHaveF16c) {
      roundFp16F16c(data, n);
    } else {
      for (int64_t i = 0; i < n; ++i) data[i] = fp16ToFloat(floatToFp16(data[i]));
    }
  }
}

void toBits(Precision p, const float* in, uint16_t* out, int64_t n) {
  COLL_CHECK_ARG(p != Precision::Float32, "toBits: float32 has no 16-bit form");
  if (p == Precision::BFloat16)
    for (int64_t i = 0; i < n; ++i) out[i] = floatToBf16(in[i]);
  else if (kHaveF16c)
    toFp16F16c(in, out, n);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = floatToFp16(in[i]);
}

void fromBits(Precision p, const uint16_t* in, float* out, int64_t n, float scale) {
  COLL_CHECK_ARG(p != Precision::Float32, "fromBits: float32 has no 16-bit form");
  if (p == Precision::BFloat16)
    for (int64_t i = 0; i < n; ++i) out[i] = bf16ToFloat(in[i]) * scale;
  else if (kHaveF16c)
    fromFp16F16c(in, out, n, scale);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = fp16ToFloat(in[i]) * scale;
}

MixedPrecision::MixedPrecision(std::vector<Param*> params, Precision precision,
                               LossScaleOptions scale)
    : params_(std::move(params)), p_(precision), o_(scale), scale_(scale.initial) {
  COLL_CHECK_ARG(std::isfinite(scale.initial) && scale.initial >= scale.minScale &&
                     scale.minScale > 0 && scale.growthInterval > 0,
                 "MixedPrecision: loss scale ", scale.initial, " (min ", scale.minScale,
                 ", growth interval ", scale.growthInterval, ")");
  master_.resize(params_.size());
}

void MixedPrecision::castParameters() {
  if (p_ == Precision::Float32) return;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& v = params_[i]->value;
    master_[i].assign(v.data(), v.data() + v.numel());
    roundInPlace(p_, v.data(), v.numel());
  }
}

void MixedPrecision::restoreMaster() {
  if (p_ == Precision::Float32) return;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& v = params_[i]->value;
    COLL_CHECK_ARG(master_[i].size() == static_cast<size_t>(v.numel()),
                   "MixedPrecision::restoreMaster without castParameters");
    std::copy(master_[i].begin(), master_[i].end(), v.data());
  }
}

bool MixedPrecision::unscaleAndCheck() {
  bool finite = true;
  const float inv = 1.0f / lossScale();
  for (Param* p : params_) {
    float* g = p->grad.data();
    for (int64_t i = 0, n = p->grad.numel(); i < n; ++i) {
      finite &= std::isfinite(g[i]);
      g[i] *= inv;
    }
  }
  if (!scalesLoss()) return finite;
  if (!finite) {
    scale_ = std::max(o_.minScale, scale_ * 0.5f);
    goodSteps_ = 0;
    ++skipped_;
    return false;
  }
  if (++goodSteps_ >= o_.growthInterval) {
    scale_ *= 2.0f;
    goodSteps_ = 0;
  }
  return true;
}

}  // namespace collective::frontend
