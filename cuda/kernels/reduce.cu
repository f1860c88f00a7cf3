// Element-wise reduction and the average's final division, for every type and op.
// Memory-bound: each thread moves 16-byte vectors when all three buffers allow it (the
// common case for cudaMalloc'd memory), so a float sum reads 2 and writes 1 full
// 16-byte transaction per thread per step.
#include <cstdint>

#include "base/error.hpp"
#include "base/types.hpp"
#include "cuda/kernels.hpp"
#include "cuda/kernels/common.cuh"
#include "cuda/runtime.hpp"

namespace coll::cuda {
namespace {

using namespace dev;

template <typename T>
union Pack16 {
  uint4 v;
  T e[16 / sizeof(T)];
};

// vec: the buffers are 16-byte aligned and the first n / per elements go as vectors.
// dst may be a or b: every element is read before the same thread writes it.
template <typename T, typename Op>
__global__ void combineKernel(T* dst, const T* a, const T* b, size_t n, bool vec) {
  constexpr size_t kPer = 16 / sizeof(T);
  const size_t nv = vec ? n / kPer : 0;
  auto* d4 = reinterpret_cast<uint4*>(dst);
  const auto* a4 = reinterpret_cast<const uint4*>(a);
  const auto* b4 = reinterpret_cast<const uint4*>(b);
  for (size_t v = globalThread(); v < nv; v += globalStride()) {
    Pack16<T> x, y, r;
    x.v = a4[v];
    y.v = b4[v];
#pragma unroll
    for (size_t j = 0; j < kPer; ++j) r.e[j] = Op::apply(x.e[j], y.e[j]);
    d4[v] = r.v;
  }
  for (size_t i = nv * kPer + globalThread(); i < n; i += globalStride())
    dst[i] = Op::apply(a[i], b[i]);
}

template <typename T, typename Op>
void launchCombine(void* d, const void* a, const void* b, size_t n, cudaStream_t s) {
  constexpr size_t kPer = 16 / sizeof(T);
  const auto bits = reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(a) |
                    reinterpret_cast<uintptr_t>(b);
  const bool vec = bits % 16 == 0;
  const size_t work = vec ? n / kPer + n % kPer : n;
  combineKernel<T, Op><<<gridFor(work), kThreads, 0, s>>>(
      static_cast<T*>(d), static_cast<const T*>(a), static_cast<const T*>(b), n, vec);
}

template <typename Op>
struct AsIs : Op {};

// Bitwise ops: integer types only (the API edge refuses them on floats).
struct BandOp {
  template <typename T>
  __device__ static T apply(T a, T b) { return static_cast<T>(a & b); }
};
struct BorOp {
  template <typename T>
  __device__ static T apply(T a, T b) { return static_cast<T>(a | b); }
};
struct BxorOp {
  template <typename T>
  __device__ static T apply(T a, T b) { return static_cast<T>(a ^ b); }
};

template <typename T, template <typename> class On = AsIs>
void reduceTyped(void* d, const void* a, const void* b, size_t n, collRedOp_t op, cudaStream_t s) {
  switch (op) {
    case collSum: case collAvg: return launchCombine<T, On<SumOp>>(d, a, b, n, s);
    case collProd: return launchCombine<T, On<ProdOp>>(d, a, b, n, s);
    case collMax: return launchCombine<T, On<MaxOp>>(d, a, b, n, s);
    case collMin: return launchCombine<T, On<MinOp>>(d, a, b, n, s);
    case collBand: case collBor: case collBxor:
      if constexpr (std::is_integral_v<T> && std::is_same_v<On<SumOp>, AsIs<SumOp>>) {
        if (op == collBand) return launchCombine<T, BandOp>(d, a, b, n, s);
        if (op == collBor) return launchCombine<T, BorOp>(d, a, b, n, s);
        return launchCombine<T, BxorOp>(d, a, b, n, s);
      }
      [[fallthrough]];
    default: COLL_THROW(collInvalidArgument, "cuda::reduce: invalid op ", static_cast<int>(op), " for this type");
  }
}

// Integers up to 32 bits divide in 64 bits: the CPU's double quotient truncated is the
// truncated integer quotient, and n may exceed the element type's range.
template <typename T>
__global__ void divideKernel(T* buf, size_t n, int divisor) {
  for (size_t i = globalThread(); i < n; i += globalStride()) {
    if constexpr (std::is_floating_point_v<T>) {
      buf[i] = divideLikeCpu(buf[i], static_cast<T>(divisor));
    } else if constexpr (sizeof(T) <= 4) {
      buf[i] = static_cast<T>(static_cast<int64_t>(buf[i]) / static_cast<int64_t>(divisor));
    } else {
      buf[i] = buf[i] / static_cast<T>(divisor);
    }
  }
}

template <bool kHalf>
__global__ void divide16Kernel(uint16_t* buf, size_t n, int divisor) {
  const float d = static_cast<float>(divisor);
  for (size_t i = globalThread(); i < n; i += globalStride()) {
    if constexpr (kHalf) buf[i] = floatToHalfBits(divideLikeCpu(halfToFloatBits(buf[i]), d));
    else buf[i] = floatToBf16Bits(divideLikeCpu(bf16ToFloatBits(buf[i]), d));
  }
}

bool partialOverlap(const void* p, const void* q, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(p);
  const auto y = reinterpret_cast<uintptr_t>(q);
  return x != y && x < y + bytes && y < x + bytes;
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t count, collDataType_t dt,
            collRedOp_t op, void* stream) {
  COLL_CHECK_ARG(validType(dt), "cuda::reduce: invalid datatype ", static_cast<int>(dt));
  COLL_CHECK_ARG(validOp(op), "cuda::reduce: invalid op ", static_cast<int>(op));
  if (count == 0) return;
  COLL_CHECK_ARG(dst && a && b, "cuda::reduce: null buffer (dst = ", dst, ", a = ", a,
                 ", b = ", b, ", count = ", count, ")");
  const size_t bytes = count * typeSize(dt);
  COLL_CHECK_ARG(!partialOverlap(dst, a, bytes) && !partialOverlap(dst, b, bytes),
                 "cuda::reduce: dst ", dst, " partially overlaps a ", a, " or b ", b, " (",
                 bytes, " bytes); only exact aliasing is allowed");
  auto s = static_cast<cudaStream_t>(stream);
  switch (dt) {
    case collInt8: reduceTyped<int8_t>(dst, a, b, count, op, s); break;
    case collUint8: reduceTyped<uint8_t>(dst, a, b, count, op, s); break;
    case collInt32: reduceTyped<int32_t>(dst, a, b, count, op, s); break;
    case collUint32: reduceTyped<uint32_t>(dst, a, b, count, op, s); break;
    case collInt64: reduceTyped<int64_t>(dst, a, b, count, op, s); break;
    case collUint64: reduceTyped<uint64_t>(dst, a, b, count, op, s); break;
    case collFloat16: reduceTyped<uint16_t, OnHalf>(dst, a, b, count, op, s); break;
    case collFloat32: reduceTyped<float>(dst, a, b, count, op, s); break;
    case collFloat64: reduceTyped<double>(dst, a, b, count, op, s); break;
    case collBfloat16: reduceTyped<uint16_t, OnBf16>(dst, a, b, count, op, s); break;
    case collInt16: reduceTyped<int16_t>(dst, a, b, count, op, s); break;
    case collUint16: reduceTyped<uint16_t>(dst, a, b, count, op, s); break;
    default: break;
  }
  COLL_CUDA_CHECK(launchStatus());
}

void finishAverage(void* buf, size_t count, collDataType_t dt, int n, void* stream) {
  COLL_CHECK_ARG(validType(dt), "cuda::finishAverage: invalid datatype ", static_cast<int>(dt));
  COLL_CHECK_ARG(n > 0, "cuda::finishAverage: n must be positive, got ", n);
  if (count == 0 || n == 1) return;
  COLL_CHECK_ARG(buf, "cuda::finishAverage: null buffer with count = ", count);
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned g = gridFor(count);
  switch (dt) {
    case collInt8: divideKernel<<<g, kThreads, 0, s>>>(static_cast<int8_t*>(buf), count, n); break;
    case collUint8: divideKernel<<<g, kThreads, 0, s>>>(static_cast<uint8_t*>(buf), count, n); break;
    case collInt32: divideKernel<<<g, kThreads, 0, s>>>(static_cast<int32_t*>(buf), count, n); break;
    case collUint32: divideKernel<<<g, kThreads, 0, s>>>(static_cast<uint32_t*>(buf), count, n); break;
    case collInt64: divideKernel<<<g, kThreads, 0, s>>>(static_cast<int64_t*>(buf), count, n); break;
    case collUint64: divideKernel<<<g, kThreads, 0, s>>>(static_cast<uint64_t*>(buf), count, n); break;
    case collFloat16: divide16Kernel<true><<<g, kThreads, 0, s>>>(static_cast<uint16_t*>(buf), count, n); break;
    case collFloat32: divideKernel<<<g, kThreads, 0, s>>>(static_cast<float*>(buf), count, n); break;
    case collFloat64: divideKernel<<<g, kThreads, 0, s>>>(static_cast<double*>(buf), count, n); break;
    case collBfloat16: divide16Kernel<false><<<g, kThreads, 0, s>>>(static_cast<uint16_t*>(buf), count, n); break;
    case collInt16: divideKernel<<<g, kThreads, 0, s>>>(static_cast<int16_t*>(buf), count, n); break;
    case collUint16: divideKernel<<<g, kThreads, 0, s>>>(static_cast<uint16_t*>(buf), count, n); break;
    default: break;
  }
  COLL_CUDA_CHECK(launchStatus());
}

}  // namespace coll::cuda
