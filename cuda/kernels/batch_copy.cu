// Many copies in one launch: blockIdx.y picks the descriptor, blockIdx.x strides over
// its bytes. The descriptors are a __grid_constant__ kernel parameter (read in place,
// not copied per thread), which is what lets the caller reuse its array at once.
#include <cstdint>

#include "base/error.hpp"
#include "cuda/kernels.hpp"
#include "cuda/kernels/common.cuh"
#include "cuda/runtime.hpp"

namespace coll::cuda {
namespace {

using namespace dev;

struct CopyBatch {
  CopyDesc d[kMaxCopiesPerLaunch];
};
// Kernel parameters are limited to 4 KiB on every architecture we build for.
static_assert(sizeof(CopyBatch) <= 4000, "copy descriptors exceed the kernel parameter space");

__global__ void batchCopyKernel(const __grid_constant__ CopyBatch batch) {
  const CopyDesc& c = batch.d[blockIdx.y];
  const auto* src = static_cast<const uint8_t*>(c.src);
  auto* dst = static_cast<uint8_t*>(c.dst);
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const bool vec = ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15u) == 0;
  const size_t nv = vec ? c.bytes / 16 : 0;
  for (size_t v = tid; v < nv; v += stride)
    reinterpret_cast<uint4*>(dst)[v] = reinterpret_cast<const uint4*>(src)[v];
  for (size_t i = nv * 16 + tid; i < c.bytes; i += stride) dst[i] = src[i];
}

void launchBatch(const CopyDesc* descs, size_t n, cudaStream_t s) {
  CopyBatch batch{};
  size_t largest = 0;
  for (size_t i = 0; i < n; ++i) {
    batch.d[i] = descs[i];
    if (descs[i].bytes > largest) largest = descs[i].bytes;
  }
  if (largest == 0) return;
  // Blocks per descriptor: enough for the largest, with the whole grid capped.
  size_t x = (largest + 16 * kThreads - 1) / (16 * kThreads);
  const size_t cap = kMaxBlocks / n > 0 ? kMaxBlocks / n : 1;
  if (x > cap) x = cap;
  const dim3 grid(static_cast<unsigned>(x), static_cast<unsigned>(n));
  batchCopyKernel<<<grid, kThreads, 0, s>>>(batch);
}

}  // namespace

void batchedCopy(const CopyDesc* descs, size_t n, void* stream) {
  if (n == 0) return;
  COLL_CHECK_ARG(descs, "cuda::batchedCopy: descs is NULL with n = ", n);
  for (size_t i = 0; i < n; ++i)
    COLL_CHECK_ARG(descs[i].bytes == 0 || (descs[i].src && descs[i].dst),
                   "cuda::batchedCopy: descriptor ", i, " has a null buffer (src = ", descs[i].src,
                   ", dst = ", descs[i].dst, ", bytes = ", descs[i].bytes, ")");
  for (size_t first = 0; first < n; first += kMaxCopiesPerLaunch) {
    const size_t m = n - first < kMaxCopiesPerLaunch ? n - first : kMaxCopiesPerLaunch;
    launchBatch(descs + first, m, static_cast<cudaStream_t>(stream));
  }
  COLL_CUDA_CHECK(launchStatus());
}

}  // namespace coll::cuda
