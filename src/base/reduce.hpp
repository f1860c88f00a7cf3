// Element-wise reduction kernels for every data type and operation (CPU, vectorised by
// the compiler). float16/bfloat16 are widened to float, combined, and rounded back with
// round-to-nearest-even, so every rank that combines the same two inputs gets the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collective.h"

namespace coll {

// dst[i] = a[i] op b[i] for i < count. dst may alias a or b (exactly, not partially).
// collAvg combines like collSum; the caller divides once at the end (finishAverage).
void reduceBuffers(void* dst, const void* a, const void* b, size_t count, collDataType_t dt,
                   collRedOp_t op);
// buf[i] /= n (integer types: truncating division), the final step of collAvg.
void finishAverage(void* buf, size_t count, collDataType_t dt, int n);

// IEEE binary16 and bfloat16 conversions (round to nearest even; NaN stays NaN).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

// Bulk conversions (used by compression).
void floatToHalfN(uint16_t* dst, const float* src, size_t n);
void halfToFloatN(float* dst, const uint16_t* src, size_t n);
void floatToBf16N(uint16_t* dst, const float* src, size_t n);
void bf16ToFloatN(float* dst, const uint16_t* src, size_t n);

// memcpy for large copies whose destination is not read again soon: on x86 the stores
// bypass the cache (no read-for-ownership of the destination, no eviction of what the
// caller works on) and are fenced before returning; elsewhere a plain memcpy.
void copyStreaming(void* dst, const void* src, size_t bytes);
// Out-of-place results at least this big are written with streaming stores: they cannot
// stay in cache anyway, and whoever consumes them (a send, the next reduction step) comes
// later. COLL_STREAM_MIN_BYTES, read once per process, else 8 MiB.
size_t streamMinBytes();

}  // namespace coll
