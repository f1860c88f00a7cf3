// int8 block quantization in the engine codec's wire format (engine/compression/
// int8_codec.cpp): [float scale][block signed bytes] per block, the last block short.
// One warp per block: the lanes stride over the block (coalesced), the scale comes from
// a shuffle max, and no integer division by the block size is needed per element.
#include <cstdint>

#include "base/error.hpp"
#include "cuda/kernels.hpp"
#include "cuda/kernels/common.cuh"
#include "cuda/runtime.hpp"

namespace coll::cuda {
namespace {

using namespace dev;

constexpr unsigned kFull = 0xffffffffu;
constexpr size_t kWarpsPerBlock = kThreads / 32;

// The CPU codec's rounding: floor(v) for v in about [-127, 128], clamped to [-127, 127];
// shifting by 128 keeps the value positive, where truncation is floor.
__device__ inline int8_t quantizeValue(float v) {
  float s = v + 128.0f;
  s = s < 1.0f ? 1.0f : (s > 255.0f ? 255.0f : s);
  return static_cast<int8_t>(static_cast<int32_t>(s) - 128);
}

// lowbias32, as the CPU codec uses for its per-element noise.
__device__ inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

__device__ inline float loadScale(const uint8_t* p) {  // unaligned little-endian float
  return __uint_as_float(p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24));
}

__global__ void quantizeKernel(const float* src, size_t n, size_t block, bool stochastic,
                               uint32_t seed, uint8_t* dst) {
  const unsigned lane = threadIdx.x & 31u;
  const size_t blocks = (n + block - 1) / block;
  for (size_t qb = globalThread() / 32; qb < blocks; qb += globalStride() / 32) {
    const size_t off = qb * block;
    const size_t m = n - off < block ? n - off : block;
    const float* x = src + off;
    float maxAbs = 0.0f;  // fmaxf ignores NaN, as the CPU's max does
    for (size_t k = lane; k < m; k += 32) maxAbs = fmaxf(maxAbs, fabsf(x[k]));
    for (int o = 16; o > 0; o >>= 1) maxAbs = fmaxf(maxAbs, __shfl_xor_sync(kFull, maxAbs, o));
    // A non-finite block cannot be scaled; zeros keep the other blocks usable. Below
    // 127 / FLT_MAX (bits 0x02fe0001), 127 / maxAbs is infinite: zeros too, as on the CPU.
    const float scale = isfinite(maxAbs) && __float_as_uint(maxAbs) >= 0x02fe0001u ? maxAbs / 127.0f : 0.0f;
    const float inv = scale > 0.0f ? 127.0f / maxAbs : 0.0f;
    uint8_t* out = dst + qb * (block + sizeof(float));
    if (lane < 4) out[lane] = static_cast<uint8_t>(__float_as_uint(scale) >> (8 * lane));
    auto* q = reinterpret_cast<int8_t*>(out + sizeof(float));
    const uint32_t blockSeed = hash32(seed ^ hash32(static_cast<uint32_t>(qb) + 0x9e3779b9u));
    for (size_t k = lane; k < m; k += 32) {
      const float u = stochastic
          ? static_cast<float>(hash32(blockSeed + static_cast<uint32_t>(k)) >> 8) * (1.0f / 16777216.0f)
          : 0.5f;
      q[k] = quantizeValue(x[k] * inv + u);
    }
  }
}

__global__ void dequantizeKernel(const uint8_t* src, size_t n, size_t block, float* dst,
                                 bool accumulate) {
  const unsigned lane = threadIdx.x & 31u;
  const size_t blocks = (n + block - 1) / block;
  for (size_t qb = globalThread() / 32; qb < blocks; qb += globalStride() / 32) {
    const size_t off = qb * block;
    const size_t m = n - off < block ? n - off : block;
    const uint8_t* in = src + qb * (block + sizeof(float));
    const float scale = loadScale(in);
    const auto* q = reinterpret_cast<const int8_t*>(in + sizeof(float));
    for (size_t k = lane; k < m; k += 32) {
      const float v = static_cast<float>(q[k]) * scale;
      dst[off + k] = accumulate ? dst[off + k] + v : v;
    }
  }
}

unsigned gridForBlocks(size_t n, size_t block) {
  return gridFor((n + block - 1) / block, kWarpsPerBlock);
}

}  // namespace

size_t int8EncodedBytes(size_t n, size_t block) {
  COLL_CHECK_ARG(block > 0, "int8EncodedBytes: block = ", block, " must be positive");
  return (n + block - 1) / block * sizeof(float) + n;
}

void int8Quantize(const float* src, size_t n, size_t block, bool stochastic, uint32_t seed,
                  uint8_t* dst, void* stream) {
  COLL_CHECK_ARG(block > 0, "cuda::int8Quantize: block = ", block, " must be positive");
  if (n == 0) return;
  COLL_CHECK_ARG(src && dst, "cuda::int8Quantize: null buffer (src = ", src, ", dst = ", dst,
                 ", n = ", n, ")");
  quantizeKernel<<<gridForBlocks(n, block), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      src, n, block, stochastic, seed, dst);
  COLL_CUDA_CHECK(launchStatus());
}

void int8Dequantize(const uint8_t* src, size_t n, size_t block, float* dst, bool accumulate,
                    void* stream) {
  COLL_CHECK_ARG(block > 0, "cuda::int8Dequantize: block = ", block, " must be positive");
  if (n == 0) return;
  COLL_CHECK_ARG(src && dst, "cuda::int8Dequantize: null buffer (src = ", src, ", dst = ", dst,
                 ", n = ", n, ")");
  dequantizeKernel<<<gridForBlocks(n, block), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      src, n, block, dst, accumulate);
  COLL_CUDA_CHECK(launchStatus());
}

}  // namespace coll::cuda
