// Top-k by magnitude without a sort of x and without a host round trip:
//  1. one block sorts a strided sample of |x| and picks the threshold that should keep
//     a little more than k elements (the CPU selectTopK's rule: the sample's k/n upper
//     quantile widened by 30% plus 8);
//  2. the elements at or above it are compacted into a candidate list (one atomic per
//     warp);
//  3. an exact radix select (4 passes of 8 bits over the magnitude's bits) finds the k-th
//     largest magnitude T among the candidates, or among all of x when the candidates
//     were too few or overflowed their buffer: every kernel reads that decision from
//     device memory, so the host never waits;
//  4. elements above T are emitted, then as many equal to T as are still needed.
// Magnitudes compare as the float's bits without the sign, which orders |x| exactly and
// puts NaN above Inf.
#include <cooperative_groups.h>

#include <cmath>
#include <cstdint>

#include "base/error.hpp"
#include "cuda/kernels.hpp"
#include "cuda/kernels/common.cuh"
#include "cuda/runtime.hpp"

namespace coll::cuda {
namespace {

using namespace dev;
namespace cg = cooperative_groups;

constexpr unsigned kFull = 0xffffffffu;
constexpr size_t kSample = 4096;  // a power of two: the bitonic sort needs one
constexpr unsigned kSortThreads = 1024;

struct TopkState {
  uint32_t thresholdKey;
  uint32_t forceAll;  // the sample could not help: select over all of x
  unsigned long long candidates;  // found above the threshold (may exceed the capacity)
  uint32_t prefix;  // radix select: the digits of T found so far
  uint32_t mask;
  uint32_t kLeft;  // how many of the elements matching the prefix are still wanted
  uint32_t emittedAbove;
  uint32_t emittedEqual;
  uint32_t hist[256];
};
constexpr size_t kStateBytes = (sizeof(TopkState) + 255) / 256 * 256;

__device__ inline uint32_t magnitudeKey(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// The candidate list is trusted when it holds at least k and did not overflow.
__device__ inline bool selectOverAll(const TopkState& st, size_t k, size_t capacity) {
  return st.forceAll || st.candidates < k || st.candidates > capacity;
}

__global__ void sampleKernel(const float* x, size_t stride, size_t phase, size_t samples,
                             size_t want, size_t k, bool forceAll, TopkState* st) {
  __shared__ uint32_t s[kSample];
  const unsigned tid = threadIdx.x;
  for (unsigned i = tid; i < 256; i += blockDim.x) st->hist[i] = 0;
  if (tid == 0) {
    st->forceAll = forceAll;
    st->candidates = 0;
    st->prefix = 0;
    st->mask = 0;
    st->kLeft = static_cast<uint32_t>(k);
    st->emittedAbove = 0;
    st->emittedEqual = 0;
    st->thresholdKey = 0;
  }
  if (forceAll) return;
  for (unsigned i = tid; i < kSample; i += blockDim.x)
    s[i] = i < samples ? magnitudeKey(x[phase + i * stride]) : 0u;  // 0 pads below all
  __syncthreads();
  // Bitonic sort, descending.
  for (unsigned size = 2; size <= kSample; size <<= 1) {
    for (unsigned half = size >> 1; half > 0; half >>= 1) {
      for (unsigned i = tid; i < kSample; i += blockDim.x) {
        const unsigned j = i ^ half;
        if (j <= i) continue;
        const bool descending = (i & size) == 0;
        const uint32_t a = s[i], b = s[j];
        if (descending ? a < b : a > b) {
          s[i] = b;
          s[j] = a;
        }
      }
      __syncthreads();
    }
  }
  if (tid == 0) st->thresholdKey = s[want - 1];
}

// Iterates in warp-uniform rounds so that every lane takes part in the ballot.
__global__ void compactKernel(const float* x, size_t n, size_t capacity, uint32_t* cand,
                              TopkState* st) {
  const unsigned lane = threadIdx.x & 31u;
  const uint32_t thr = st->thresholdKey;
  for (size_t first = globalThread() - lane; first < n; first += globalStride()) {
    const size_t i = first + lane;
    const bool hit = i < n && magnitudeKey(x[i]) >= thr;
    const unsigned ballot = __ballot_sync(kFull, hit);
    if (ballot == 0) continue;
    unsigned long long base = 0;
    if (lane == 0) base = atomicAdd(&st->candidates, static_cast<unsigned long long>(__popc(ballot)));
    base = __shfl_sync(kFull, base, 0);
    const unsigned long long pos = base + __popc(ballot & ((1u << lane) - 1u));
    if (hit && pos < capacity) cand[pos] = static_cast<uint32_t>(i);
  }
}

// Calls f(index) for every element of the current source.
template <typename F>
__device__ inline void forEachSource(const TopkState& st, size_t n, size_t k, size_t capacity,
                                     const uint32_t* cand, F&& f) {
  if (selectOverAll(st, k, capacity)) {
    for (size_t i = globalThread(); i < n; i += globalStride()) f(static_cast<uint32_t>(i));
  } else {
    const size_t m = static_cast<size_t>(st.candidates);
    for (size_t j = globalThread(); j < m; j += globalStride()) f(cand[j]);
  }
}

__global__ void histKernel(const float* x, size_t n, size_t k, size_t capacity,
                           const uint32_t* cand, unsigned shift, TopkState* st) {
  __shared__ uint32_t h[256];
  for (unsigned i = threadIdx.x; i < 256; i += blockDim.x) h[i] = 0;
  __syncthreads();
  const uint32_t prefix = st->prefix, mask = st->mask;
  forEachSource(*st, n, k, capacity, cand, [&](uint32_t i) {
    const uint32_t key = magnitudeKey(x[i]);
    if ((key & mask) == prefix) atomicAdd(&h[(key >> shift) & 255u], 1u);
  });
  __syncthreads();
  for (unsigned i = threadIdx.x; i < 256; i += blockDim.x)
    if (h[i]) atomicAdd(&st->hist[i], h[i]);
}

// One thread: the digit where the count from the top reaches kLeft.
__global__ void pickDigitKernel(unsigned shift, TopkState* st) {
  uint32_t above = 0;
  int digit = 0;
  for (int b = 255; b >= 0; --b) {
    if (above + st->hist[b] >= st->kLeft) {
      digit = b;
      break;
    }
    above += st->hist[b];
  }
  st->prefix |= static_cast<uint32_t>(digit) << shift;
  st->mask |= 255u << shift;
  st->kLeft -= above;
  for (int b = 0; b < 256; ++b) st->hist[b] = 0;
}

__global__ void emitKernel(const float* x, size_t n, size_t k, size_t capacity,
                           const uint32_t* cand, uint32_t base, uint32_t* outIndex,
                           float* outValue, TopkState* st) {
  const uint32_t t = st->prefix;
  const uint32_t equalWanted = st->kLeft;
  const size_t aboveCount = k - equalWanted;
  forEachSource(*st, n, k, capacity, cand, [&](uint32_t i) {
    const float v = x[i];
    const uint32_t key = magnitudeKey(v);
    size_t pos;
    if (key > t) {
      // k can be large (1% of 25M): one atomic per group of lanes, not per element.
      cg::coalesced_group g = cg::coalesced_threads();
      uint32_t first = 0;
      if (g.thread_rank() == 0) first = atomicAdd(&st->emittedAbove, static_cast<uint32_t>(g.num_threads()));
      pos = g.shfl(first, 0) + g.thread_rank();
    } else if (key == t) {
      const uint32_t e = atomicAdd(&st->emittedEqual, 1u);
      if (e >= equalWanted) return;
      pos = aboveCount + e;
    } else {
      return;
    }
    outIndex[pos] = base + i;
    outValue[pos] = v;
  });
}

__global__ void takeAllKernel(const float* x, size_t n, uint32_t base, uint32_t* outIndex,
                              float* outValue) {
  for (size_t i = globalThread(); i < n; i += globalStride()) {
    outIndex[i] = base + static_cast<uint32_t>(i);
    outValue[i] = x[i];
  }
}

struct Plan {
  size_t samples, stride, want, capacity;
  bool forceAll;
};

Plan makePlan(size_t n, size_t k) {
  Plan p{};
  p.samples = n < kSample ? n : kSample;
  p.stride = n / p.samples;
  const double frac = static_cast<double>(k) / static_cast<double>(n);
  p.want = static_cast<size_t>(std::ceil(frac * 1.3 * static_cast<double>(p.samples))) + 8;
  p.forceAll = p.want >= p.samples;
  // Room for twice the expected candidate count: overflowing costs a full radix select.
  const double expected = static_cast<double>(n) * static_cast<double>(p.want) / p.samples;
  const size_t cap = static_cast<size_t>(2.0 * expected) + 4096;
  p.capacity = p.forceAll ? 0 : (cap < n ? cap : n);
  return p;
}

}  // namespace

size_t topkScratchBytes(size_t n, size_t k) {
  if (n == 0 || k == 0 || k >= n) return 0;
  return kStateBytes + makePlan(n, k).capacity * sizeof(uint32_t);
}

void topk(const float* x, size_t n, size_t k, uint32_t base, uint32_t seed, uint32_t* outIndex,
          float* outValue, void* scratch, size_t scratchBytes, void* stream) {
  if (n == 0 || k == 0) return;
  COLL_CHECK_ARG(x && outIndex && outValue, "cuda::topk: null buffer (x = ", x, ", outIndex = ",
                 outIndex, ", outValue = ", outValue, ", n = ", n, ")");
  COLL_CHECK_ARG(n <= UINT32_MAX - base, "cuda::topk: n = ", n, " from base ", base,
                 " does not fit 32-bit indices");
  auto s = static_cast<cudaStream_t>(stream);
  if (k >= n) {
    takeAllKernel<<<gridFor(n), kThreads, 0, s>>>(x, n, base, outIndex, outValue);
    COLL_CUDA_CHECK(launchStatus());
    return;
  }
  const size_t need = topkScratchBytes(n, k);
  COLL_CHECK_ARG(scratch && scratchBytes >= need, "cuda::topk: scratch of ", scratchBytes,
                 " bytes at ", scratch, ", need ", need, " (topkScratchBytes(", n, ", ", k, "))");
  const Plan p = makePlan(n, k);
  auto* st = static_cast<TopkState*>(scratch);
  auto* cand = reinterpret_cast<uint32_t*>(static_cast<char*>(scratch) + kStateBytes);
  const size_t phase = p.stride > 1 ? seed % p.stride : 0;
  sampleKernel<<<1, kSortThreads, 0, s>>>(x, p.stride, phase, p.samples, p.want, k, p.forceAll, st);
  if (!p.forceAll) compactKernel<<<gridFor(n), kThreads, 0, s>>>(x, n, p.capacity, cand, st);
  for (unsigned shift = 24;; shift -= 8) {
    histKernel<<<gridFor(n), kThreads, 0, s>>>(x, n, k, p.capacity, cand, shift, st);
    pickDigitKernel<<<1, 1, 0, s>>>(shift, st);
    if (shift == 0) break;
  }
  emitKernel<<<gridFor(n), kThreads, 0, s>>>(x, n, k, p.capacity, cand, base, outIndex, outValue, st);
  COLL_CUDA_CHECK(launchStatus());
}

}  // namespace coll::cuda
