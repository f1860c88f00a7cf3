// float32 <-> float16 / bfloat16 casts with the CPU codecs' exact bits (see common.cuh).
#include <cstdint>

#include "base/error.hpp"
#include "cuda/kernels.hpp"
#include "cuda/kernels/common.cuh"
#include "cuda/runtime.hpp"

namespace coll::cuda {
namespace {

using namespace dev;

enum class Cast { ToHalf, FromHalf, ToBf16, FromBf16 };

template <Cast kCast, typename D, typename S>
__global__ void castKernel(D* dst, const S* src, size_t n) {
  for (size_t i = globalThread(); i < n; i += globalStride()) {
    if constexpr (kCast == Cast::ToHalf) dst[i] = floatToHalfBits(src[i]);
    else if constexpr (kCast == Cast::FromHalf) dst[i] = halfToFloatBits(src[i]);
    else if constexpr (kCast == Cast::ToBf16) dst[i] = floatToBf16Bits(src[i]);
    else dst[i] = bf16ToFloatBits(src[i]);
  }
}

template <Cast kCast, typename D, typename S>
void launchCast(const char* name, D* dst, const S* src, size_t n, void* stream) {
  if (n == 0) return;
  COLL_CHECK_ARG(dst && src, "cuda::", name, ": null buffer (dst = ", dst, ", src = ", src,
                 ", n = ", n, ")");
  castKernel<kCast><<<gridFor(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(dst, src, n);
  COLL_CUDA_CHECK(launchStatus());
}

}  // namespace

void floatToHalf(uint16_t* dst, const float* src, size_t n, void* stream) {
  launchCast<Cast::ToHalf>("floatToHalf", dst, src, n, stream);
}
void halfToFloat(float* dst, const uint16_t* src, size_t n, void* stream) {
  launchCast<Cast::FromHalf>("halfToFloat", dst, src, n, stream);
}
void floatToBf16(uint16_t* dst, const float* src, size_t n, void* stream) {
  launchCast<Cast::ToBf16>("floatToBf16", dst, src, n, stream);
}
void bf16ToFloat(float* dst, const uint16_t* src, size_t n, void* stream) {
  launchCast<Cast::FromBf16>("bf16ToFloat", dst, src, n, stream);
}

}  // namespace coll::cuda
