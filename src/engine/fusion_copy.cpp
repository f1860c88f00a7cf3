#include "engine/fusion_copy.hpp"

#include <cstdint>
#include <cstring>

#include "base/error.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll::engine {
namespace {

template <typename T>
void scaleLoop(T* dst, const T* src, size_t n, T s) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i] * s;
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void scaleHalfLoop(uint16_t* dst, const uint16_t* src, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) dst[i] = FromF(ToF(src[i]) * s);
}

}  // namespace

void scaledCopy(void* dst, const void* src, size_t count, collDataType_t dt, double scale) {
  if (count == 0) return;
  if (scale == 1.0) {
    if (dst != src) std::memcpy(dst, src, count * typeSize(dt));
    return;
  }
  switch (dt) {
    case collFloat32:
      scaleLoop(static_cast<float*>(dst), static_cast<const float*>(src), count, static_cast<float>(scale));
      break;
    case collFloat64:
      scaleLoop(static_cast<double*>(dst), static_cast<const double*>(src), count, scale);
      break;
    case collFloat16:
      scaleHalfLoop<halfToFloat, floatToHalf>(static_cast<uint16_t*>(dst),
                                              static_cast<const uint16_t*>(src), count,
                                              static_cast<float>(scale));
      break;
    case collBfloat16:
      scaleHalfLoop<bf16ToFloat, floatToBf16>(static_cast<uint16_t*>(dst),
                                              static_cast<const uint16_t*>(src), count,
                                              static_cast<float>(scale));
      break;
    default:
      COLL_THROW(collInvalidArgument, "scale factor ", scale, " given for integer type ",
                 typeName(dt), "; only floating types can be scaled");
  }
}

void floatStageIn(float* dst, const float* src, size_t count, float scale, const float* residual) {
  if (residual) {
    for (size_t i = 0; i < count; ++i) dst[i] = src[i] * scale + residual[i];
  } else if (scale != 1.0f) {
    for (size_t i = 0; i < count; ++i) dst[i] = src[i] * scale;
  } else if (dst != src) {
    std::memcpy(dst, src, count * sizeof(float));
  }
}

void floatStageOut(float* dst, const float* src, size_t count, float scale) {
  if (scale != 1.0f) {
    for (size_t i = 0; i < count; ++i) dst[i] = src[i] * scale;
  } else if (dst != src) {
    std::memcpy(dst, src, count * sizeof(float));
  }
}

}  // namespace coll::engine
