#include "engine/compression/topk.hpp"

#include <algorithm>
#include <cmath>

namespace coll::engine {
namespace {
constexpr size_t kSample = 4096;
}

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
    // Branchless compaction: always store, advance only on a hit.
    size_t m = 0;
    if (first && add) {
      for (size_t i = 0; i < n; ++i) {
        float v = x[i] + add[i] * scale;
        xw[i] = v;
        c[m] = static_cast<uint32_t>(i);
        m += std::fabs(v) >= threshold ? 1 : 0;
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        c[m] = static_cast<uint32_t>(i);
        m += std::fabs(x[i]) >= threshold ? 1 : 0;
      }
    }
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
