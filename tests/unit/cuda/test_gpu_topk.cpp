// Top-k on the GPU: exactly k entries, distinct indices, values that are x at those
// indices, and magnitudes that are the k largest (checked against a full sort and
// against the CPU selectTopK), on the sampled path and on both fallbacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "cuda/kernels.hpp"
#include "engine/compression/topk.hpp"
#include "gpu_util.hpp"

namespace {

struct Picked {
  std::vector<uint32_t> index;
  std::vector<float> value;
};

Picked gpuTopk(const std::vector<float>& x, size_t k, uint32_t base, uint32_t seed) {
  const size_t n = x.size(), m = std::min(k, n);
  gputest::DeviceMemory dx(n * 4), di(m * 4 + 4), dv(m * 4 + 4);
  gputest::DeviceMemory scratch(coll::cuda::topkScratchBytes(n, k) + 1);
  dx.upload(x);
  coll::cuda::topk(dx.as<float>(), n, k, base, seed, di.as<uint32_t>(), dv.as<float>(), scratch.get(),
                   scratch.bytes(), nullptr);
  gputest::sync();
  return {di.download<uint32_t>(m), dv.download<float>(m)};
}

// Exactly the k largest magnitudes (ties: any of them).
void expectTopk(const std::vector<float>& x, size_t k, uint32_t base, const Picked& p) {
  const size_t m = std::min(k, x.size());
  ASSERT_EQ(p.index.size(), m);
  std::set<uint32_t> seen;
  std::vector<float> picked, all;
  for (size_t i = 0; i < m; ++i) {
    ASSERT_GE(p.index[i], base);
    const uint32_t j = p.index[i] - base;
    ASSERT_LT(j, x.size());
    ASSERT_TRUE(seen.insert(j).second) << "index " << j << " picked twice";
    ASSERT_EQ(std::memcmp(&p.value[i], &x[j], 4), 0) << "value at " << j;
    picked.push_back(std::fabs(x[j]));
  }
  for (float v : x) all.push_back(std::fabs(v));
  std::sort(all.begin(), all.end(), std::greater<>());
  std::sort(picked.begin(), picked.end(), std::greater<>());
  all.resize(m);
  EXPECT_EQ(picked, all) << "not the k largest magnitudes";
}

std::vector<float> normal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng);
  return x;
}

TEST(GpuTopk, SampledThresholdPathPicksTheLargest) {
  COLL_REQUIRE_GPU();
  const auto x = normal(1'000'003, 1);
  for (size_t k : {size_t{1}, size_t{10'000}, size_t{100'000}}) {
    const auto p = gpuTopk(x, k, 1000, 42);
    expectTopk(x, k, 1000, p);
    // Same magnitudes as the CPU implementation picks.
    std::vector<uint32_t> cpu;
    coll::engine::Rng rng(3);
    coll::engine::selectTopK(x.data(), x.size(), k, 0, cpu, rng);
    std::vector<float> a, b;
    for (uint32_t i : cpu) a.push_back(std::fabs(x[i]));
    for (float v : p.value) b.push_back(std::fabs(v));
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b) << "k = " << k;
  }
}

TEST(GpuTopk, UnluckySampleFallsBackToTheWholeInput) {
  COLL_REQUIRE_GPU();
  // n = 4096 * 100: the sample is every 100th element from phase seed % 100. Make exactly
  // those huge, so the threshold keeps ~60 candidates while k is 4096.
  const size_t n = 4096 * 100, k = 8192;
  const uint32_t seed = 7;
  auto x = normal(n, 2);
  for (size_t i = seed % 100; i < n; i += 100) x[i] = 1000.0f + static_cast<float>(i) * 1e-3f;
  expectTopk(x, k, 0, gpuTopk(x, k, 0, seed));
}

TEST(GpuTopk, TiesAndOverflowingCandidatesStillGiveExactlyK) {
  COLL_REQUIRE_GPU();
  std::vector<float> x(300'000, -2.5f);  // every element ties: candidates overflow
  for (size_t i = 0; i < x.size(); i += 1000) x[i] = 1.0f;
  const auto p = gpuTopk(x, 3000, 0, 1);
  expectTopk(x, 3000, 0, p);
  for (float v : p.value) ASSERT_EQ(v, -2.5f);
}

TEST(GpuTopk, NanCountsAsLargestAndKAtLeastNTakesAll) {
  COLL_REQUIRE_GPU();
  auto x = normal(50'000, 3);
  x[12345] = std::numeric_limits<float>::quiet_NaN();
  const auto p = gpuTopk(x, 1, 0, 0);
  ASSERT_EQ(p.index.size(), 1u);
  EXPECT_EQ(p.index[0], 12345u);
  const auto all = gpuTopk(normal(100, 4), 500, 7, 0);
  ASSERT_EQ(all.index.size(), 100u);
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(all.index[i], 7 + i);
}

}  // namespace
