// Host-callable launchers for the CUDA kernels (cuda/kernels/*.cu). Plain C++: a
// cudaStream_t travels as void* (nullptr: the legacy default stream), so callers need no
// CUDA header. Built only with CUDA (COLL_HAVE_CUDA).
//
// Every launcher is asynchronous on `stream`: it checks its arguments (collInvalidArgument,
// before touching the GPU), launches, and reports a failed launch as collUnhandledCudaError
// with CUDA's message. Faults while the kernel runs surface at the next synchronising call.
// Pointers are device (or managed) memory unless said otherwise. The current device must
// be the one that owns the buffers and the stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collective.h"

namespace coll::cuda {

// ---- reduction (same bits as coll::reduceBuffers / coll::finishAverage on the CPU)

// dst[i] = a[i] op b[i]; dst may alias a or b exactly. collAvg combines like collSum.
void reduce(void* dst, const void* a, const void* b, size_t count, collDataType_t dt,
            collRedOp_t op, void* stream);
// buf[i] /= n, the final step of collAvg (integer types: truncating division).
void finishAverage(void* buf, size_t count, collDataType_t dt, int n, void* stream);

// ---- casts (same bits as coll::floatToHalf and friends)

void floatToHalf(uint16_t* dst, const float* src, size_t n, void* stream);
void halfToFloat(float* dst, const uint16_t* src, size_t n, void* stream);
void floatToBf16(uint16_t* dst, const float* src, size_t n, void* stream);
void bf16ToFloat(float* dst, const uint16_t* src, size_t n, void* stream);

// ---- int8 block quantization, the wire format of the engine's int8 codec:
// per block of `block` elements, a float scale (max |x| / 127, 0 for a non-finite or
// all-zero block) then one signed byte per element. Nearest rounding gives the same
// bytes as the CPU codec; stochastic rounding draws its noise from a hash of
// (seed, block, element), so it is reproducible but not the CPU's sequence.

size_t int8EncodedBytes(size_t n, size_t block);
void int8Quantize(const float* src, size_t n, size_t block, bool stochastic, uint32_t seed,
                  uint8_t* dst, void* stream);
// dst[i] = q[i] * scale, or dst[i] += q[i] * scale when accumulate.
void int8Dequantize(const uint8_t* src, size_t n, size_t block, float* dst, bool accumulate,
                    void* stream);

// ---- top-k by magnitude: exactly k = min(k, n) entries of largest |x|, in no particular
// order (ties broken arbitrarily), as (base + index, value) pairs. A strided sample gives
// a threshold, the elements above it are compacted, and an exact radix select over those
// candidates finds the k-th magnitude; when the sample was unlucky (too few or too many
// candidates) the radix select runs over all of x instead. Never synchronises the host.
// NaN counts as larger than any number.

// Device scratch the call needs (the caller owns it; reusable across calls on one stream).
size_t topkScratchBytes(size_t n, size_t k);
void topk(const float* x, size_t n, size_t k, uint32_t base, uint32_t seed, uint32_t* outIndex,
          float* outValue, void* scratch, size_t scratchBytes, void* stream);

// ---- batched copies: many tensors into or out of a fusion buffer in one launch per
// kMaxCopiesPerLaunch descriptors (the descriptors travel as kernel parameters, so the
// host array may be reused as soon as the call returns). Copies must not overlap.

struct CopyDesc {
  const void* src;
  void* dst;
  size_t bytes;
};
constexpr size_t kMaxCopiesPerLaunch = 128;
void batchedCopy(const CopyDesc* descs, size_t n, void* stream);

}  // namespace coll::cuda
