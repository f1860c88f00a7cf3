// Device-side building blocks shared by the kernels: launch geometry, the element-wise
// operations and the float16/bfloat16 codecs.
//
// Bit-exactness with the CPU kernels (src/base/reduce.cpp) is the contract, so the
// operations here are ports of the CPU ones, not CUDA's intrinsics:
//  - the 16-bit codecs are the same integer bit manipulation (round to nearest even,
//    NaN payload kept and made quiet), never __float2half_rn, whose NaN payloads are
//    not specified;
//  - float results that are NaN become the canonical quiet NaN, so op(a, b) == op(b, a)
//    bit for bit and every rank agrees whatever order it combined in;
//  - max/min order -0 below +0 and propagate NaN (IEEE 754-2019 maximum/minimum);
//  - integer sum/prod wrap modulo 2^bits (computed unsigned).
// The kernels are compiled with -fmad=false (see cuda/meson.build): a fused multiply-add
// rounds once where the CPU rounds twice, which would break bit-exactness of x*s+c.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace coll::cuda::dev {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; grid-stride loops cover the
// rest, so huge counts never overflow the grid.
constexpr size_t kMaxBlocks = 8192;

inline unsigned gridFor(size_t work, size_t perBlock = kThreads) {
  size_t blocks = (work + perBlock - 1) / perBlock;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__device__ inline size_t globalThread() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline size_t globalStride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

// ---------------------------------------------------------------- 16-bit float codecs

__device__ inline uint32_t pick(bool c, uint32_t x, uint32_t y) { return c ? x : y; }

__device__ inline float halfToFloatBits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  const uint32_t normal = ((exp + (127 - 15)) << 23) | (mant << 13);
  const uint32_t special = 0x7f800000u | (mant << 13) | pick(mant != 0, 0x00400000u, 0u);
  // mant * 2^-24 is exact and a normal float, so no FTZ mode can flush it.
  const float scaled = static_cast<float>(static_cast<int32_t>(mant)) * __uint_as_float(0x33800000u);
  const uint32_t subnormal = __float_as_uint(scaled);
  const uint32_t bits = pick(exp == 0x1f, special, pick(exp == 0, subnormal, normal));
  return __uint_as_float(sign | bits);
}

__device__ inline uint16_t floatToHalfBits(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  const uint32_t rebased = a - ((127u - 15u) << 23);
  const uint32_t normal = (rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13;
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e < 31u ? 126u - e : 31u;
  const uint32_t sub = (m + ((1u << shift) >> 1) - 1u + ((m >> shift) & 1u)) >> shift;
  const uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  uint32_t bits = pick(a < 0x38800000u, sub, normal);
  bits = pick(a >= 0x47800000u, 0x7c00u, bits);
  bits = pick(a > 0x7f800000u, nan, bits);
  return static_cast<uint16_t>(sign | bits);
}

__device__ inline float bf16ToFloatBits(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

__device__ inline uint16_t floatToBf16Bits(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x0040u;
  return static_cast<uint16_t>(f != f ? nan : rounded);
}

// ---------------------------------------------------------------- operations

__device__ inline float quietNan(float) { return __uint_as_float(0x7fc00000u); }
__device__ inline double quietNan(double) { return __longlong_as_double(0x7ff8000000000000ll); }

template <typename F>
__device__ inline F canonicalNan(F r) {
  return r != r ? quietNan(r) : r;
}

// x / d for a positive count d, with the CPU's NaN: x86 returns a NaN operand made quiet
// (payload kept), NVIDIA GPUs one fixed NaN, so the operand is passed through by hand.
__device__ inline float divideLikeCpu(float x, float d) {
  return x != x ? __uint_as_float(__float_as_uint(x) | 0x00400000u) : x / d;
}
__device__ inline double divideLikeCpu(double x, double d) {
  return x != x ? __longlong_as_double(__double_as_longlong(x) | 0x0008000000000000ll) : x / d;
}

// Total order on floats with -0 just below +0: negative values get their magnitude
// bits flipped so that a larger magnitude compares smaller.
__device__ inline int32_t orderKey(float x) {
  const int32_t s = __float_as_int(x);
  return s ^ static_cast<int32_t>(static_cast<uint32_t>(s >> 31) >> 1);
}
__device__ inline int64_t orderKey(double x) {
  const int64_t s = __double_as_longlong(x);
  return s ^ static_cast<int64_t>(static_cast<uint64_t>(s >> 63) >> 1);
}

template <typename T>
__device__ inline T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
__device__ inline T wrapMul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  // uint8/uint16 promote to int, whose product can overflow: multiply in 32+ bits.
  using W = std::conditional_t<(sizeof(U) < 4), uint32_t, U>;
  return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
}

struct SumOp {
  template <typename T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return canonicalNan(a + b);
    else return wrapAdd(a, b);
  }
};
struct ProdOp {
  template <typename T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return canonicalNan(a * b);
    else return wrapMul(a, b);
  }
};
struct MaxOp {
  template <typename T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      const T r = orderKey(a) > orderKey(b) ? a : b;
      return (a != a || b != b) ? quietNan(a) : r;
    } else {
      return a > b ? a : b;
    }
  }
};
struct MinOp {
  template <typename T>
  __device__ static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      const T r = orderKey(a) < orderKey(b) ? a : b;
      return (a != a || b != b) ? quietNan(a) : r;
    } else {
      return a < b ? a : b;
    }
  }
};

// 16-bit floats: widen, combine in float, round back (the CPU's combine16 / OnBf16).
template <typename Op>
struct OnHalf {
  __device__ static uint16_t apply(uint16_t a, uint16_t b) {
    return floatToHalfBits(Op::apply(halfToFloatBits(a), halfToFloatBits(b)));
  }
};
template <typename Op>
struct OnBf16 {
  __device__ static uint16_t apply(uint16_t a, uint16_t b) {
    return floatToBf16Bits(Op::apply(bf16ToFloatBits(a), bf16ToFloatBits(b)));
  }
};

// ---------------------------------------------------------------- launch errors

// The launch status (a bad configuration, no device, a sticky earlier fault) as the
// error the launcher reports; kernels themselves fail asynchronously on the stream.
inline cudaError_t launchStatus() { return cudaGetLastError(); }

}  // namespace coll::cuda::dev
