// Copies between user tensors and fusion buffers, with the pre/post scaling folded in so
// that data is touched once. The same routines serve the in-place (unfused) path, which
// is what makes fused and unfused results bit-identical.
#pragma once

#include <cstddef>

#include "collective.h"

namespace coll::engine {

// dst[i] = src[i] * scale in dt's arithmetic (half types widen to float and round back).
// scale == 1 is a plain copy; dst == src scales in place. Integer types require scale 1.
void scaledCopy(void* dst, const void* src, size_t count, collDataType_t dt, double scale);

// Float staging for compression: dst[i] = src[i] * scale (+ residual[i] when non-null).
void floatStageIn(float* dst, const float* src, size_t count, float scale, const float* residual);
// dst[i] = src[i] * scale.
void floatStageOut(float* dst, const float* src, size_t count, float scale);

}  // namespace coll::engine
