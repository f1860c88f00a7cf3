#include "engine/compression/topk.hpp"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace coll::engine {
namespace {
constexpr size_t kSample = 4096;

// The candidate scans: c[] gets, in order, every i with |v_i| >= threshold; returns how
// many. v_i is x[i], or (accumulating) x[i] + add[i] * scale, which is also stored in xw.
// The scalar loops are branch-free (always store, advance on a hit); with AVX-512 sixteen
// elements go per step through a compressing store. Both compute the sum as a product
// rounded, then a sum rounded (no fused multiply-add), so they agree bit for bit.
size_t scanScalar(const float* x, size_t n, float threshold, uint32_t* c, size_t from) {
  size_t m = 0;
  for (size_t i = from; i < n; ++i) {
    c[m] = static_cast<uint32_t>(i);
    m += std::fabs(x[i]) >= threshold ? 1 : 0;
  }
  return m;
}

size_t scanAccumulateScalar(float* xw, const float* x, const float* add, float scale, size_t n,
                            float threshold, uint32_t* c, size_t from) {
  size_t m = 0;
  for (size_t i = from; i < n; ++i) {
    const float p = add[i] * scale;
    const float s = x[i] + p;
    const float v = s == s ? s : 0.0f;  // a NaN is dropped, not owed (see scan512)
    xw[i] = v;
    c[m] = static_cast<uint32_t>(i);
    m += std::fabs(v) >= threshold ? 1 : 0;
  }
  return m;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define COLL_TOPK_AVX512 1
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
__attribute__((target("avx512f"))) size_t scan512(const float* x, const float* add, float* xw,
                                                  float scale, size_t n, float threshold, uint32_t* c) {
  const __m512 t = _mm512_set1_ps(threshold), s = _mm512_set1_ps(scale);
  const __m512i sixteen = _mm512_set1_epi32(16);
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  size_t m = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    if (add) {
      v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_loadu_ps(add + i), s));
      // A NaN is never selected (|NaN| >= t is false): kept in the residual it would stay
      // there, and the element would never be sent again. It is dropped instead.
      v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
      _mm512_storeu_ps(xw + i, v);
    }
    const __m512 a = _mm512_abs_ps(v);
    const __mmask16 hit = _mm512_cmp_ps_mask(a, t, _CMP_GE_OQ);  // NaN: no hit, as the scalar >=
    _mm512_mask_compressstoreu_epi32(c + m, hit, idx);
    m += static_cast<size_t>(__builtin_popcount(hit));
    idx = _mm512_add_epi32(idx, sixteen);
  }
  if (i < n)
    m += add ? scanAccumulateScalar(xw, x, add, scale, n, threshold, c + m, i)
             : scanScalar(x, n, threshold, c + m, i);
  return m;
}
#pragma GCC pop_options
#endif

size_t scan(float* xw, const float* x, const float* add, float scale, size_t n, float threshold,
            uint32_t* c) {
#if defined(COLL_TOPK_AVX512)
  static const bool wide = __builtin_cpu_supports("avx512f");
  if (wide) return scan512(x, add, xw, scale, n, threshold, c);
#endif
  return add ? scanAccumulateScalar(xw, x, add, scale, n, threshold, c, 0)
             : scanScalar(x, n, threshold, c, 0);
}
}  // namespace

size_t topkCount(size_t n, double density) {
  if (n == 0) return 0;
  double k = std::ceil(density * static_cast<double>(n));
  if (k < 1) k = 1;
  return k >= static_cast<double>(n) ? n : static_cast<size_t>(k);
}

namespace {

// Shared by both entry points. When add is non-null, x[i] += add[i] * scale happens in the
// first full scan (the sample reads the updated values without writing them).
void select(float* xw, const float* x, const float* add, float scale, size_t n, size_t k,
            uint32_t base, std::vector<uint32_t>& out, Rng& rng, std::vector<uint32_t>* scratch) {
  if (k == 0) {
    if (add)
      for (size_t i = 0; i < n; ++i) xw[i] += add[i] * scale;
    return;
  }
  if (k >= n) {
    if (add)
      for (size_t i = 0; i < n; ++i) xw[i] += add[i] * scale;
    for (size_t i = 0; i < n; ++i) out.push_back(base + static_cast<uint32_t>(i));
    return;
  }
  // Sample |x| on a stride with a random phase; the sample's (k/n) upper quantile,
  // widened by a margin, is a threshold that keeps a little more than k candidates.
  size_t s = std::min(n, kSample);
  size_t stride = n / s;
  size_t phase = stride > 1 ? rng.next() % stride : 0;
  std::vector<float> sample(s);
  for (size_t i = 0; i < s; ++i) {
    size_t at = phase + i * stride;
    sample[i] = std::fabs(add ? x[at] + add[at] * scale : x[at]);
  }
  double frac = static_cast<double>(k) / static_cast<double>(n);
  size_t want = static_cast<size_t>(std::ceil(frac * 1.3 * s)) + 8;
  std::vector<uint32_t> local;
  std::vector<uint32_t>& cand = scratch ? *scratch : local;
  if (cand.size() < n) cand.resize(n);
  uint32_t* c = cand.data();
  size_t found = 0;
  for (bool first = true;; first = false) {
    float threshold = 0.0f;
    if (want < s) {
      std::nth_element(sample.begin(), sample.begin() + (want - 1), sample.end(), std::greater<>());
      threshold = sample[want - 1];
    }
    const size_t m = first && add ? scan(xw, x, add, scale, n, threshold, c)
                                  : scan(nullptr, x, nullptr, 1.0f, n, threshold, c);
    found = m;
    if (found >= k) break;
    if (want >= s) {  // even threshold 0 was not enough: NaNs; take every index
      for (size_t i = 0; i < n; ++i) c[i] = static_cast<uint32_t>(i);
      found = n;
      break;
    }
    want *= 4;  // the sample was unlucky: lower the threshold and scan again
  }
  // Refine: exact k-th largest among the candidates only.
  std::nth_element(c, c + (k - 1), c + found, [x](uint32_t a, uint32_t b) {
    return std::fabs(x[a]) > std::fabs(x[b]);
  });
  for (size_t i = 0; i < k; ++i) out.push_back(base + c[i]);
}

}  // namespace

void selectTopK(const float* x, size_t n, size_t k, uint32_t base, std::vector<uint32_t>& out,
                Rng& rng, std::vector<uint32_t>* scratch) {
  select(nullptr, x, nullptr, 1.0f, n, k, base, out, rng, scratch);
}

void selectTopKAccumulate(float* x, const float* add, float scale, size_t n, size_t k,
                          uint32_t base, std::vector<uint32_t>& out, Rng& rng,
                          std::vector<uint32_t>* scratch) {
  select(x, x, add, scale, n, k, base, out, rng, scratch);
}

}  // namespace coll::engine
