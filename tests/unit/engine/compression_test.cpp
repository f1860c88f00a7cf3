// Compressors: error bounds, top-k selection, compressed allreduce over simulated ranks
// and error-feedback convergence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "engine/compression/codec.hpp"
#include "engine/compression/compressed_allreduce.hpp"
#include "engine/compression/topk.hpp"
#include "fake_collectives.hpp"

namespace coll::engine {
namespace {

std::vector<float> randomVec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

CompressionSpec spec(CompressKind k, bool stochastic = true, int block = 64, double density = 0.01) {
  CompressionSpec s;
  s.kind = k;
  s.stochastic = stochastic;
  s.blockSize = block;
  s.density = density;
  return s;
}

std::vector<float> roundTrip(const DenseCodec& c, const std::vector<float>& x, Rng& rng) {
  std::vector<uint8_t> enc(c.encodedBytes(x.size()));
  std::vector<float> rt(x.size()), dec(x.size());
  c.encode(x.data(), x.size(), enc.data(), rt.data(), rng);
  c.decode(enc.data(), x.size(), dec.data());
  EXPECT_EQ(rt, dec);  // the roundtrip output is exactly what a receiver decodes
  return dec;
}

TEST(Int8Codec, ErrorBoundedByBlockScale) {
  const size_t n = 1000, block = 64;  // last block partial
  auto x = randomVec(n, 1, 3.0f);
  x[5] = 0;
  for (bool stochastic : {true, false}) {
    auto c = makeDenseCodec(spec(CompressKind::Int8, stochastic, block));
    EXPECT_EQ(c->encodedBytes(n), n + 16 * sizeof(float));
    Rng rng(42);
    auto y = roundTrip(*c, x, rng);
    for (size_t b = 0; b < n; b += block) {
      float maxAbs = 0;
      for (size_t i = b; i < std::min(n, b + block); ++i) maxAbs = std::max(maxAbs, std::fabs(x[i]));
      float scale = maxAbs / 127.0f;
      float bound = (stochastic ? 1.0f : 0.5f) * scale * 1.0001f;
      for (size_t i = b; i < std::min(n, b + block); ++i)
        ASSERT_LE(std::fabs(y[i] - x[i]), bound) << "i=" << i << " stochastic=" << stochastic;
    }
  }
}

// Below about 3.7e-37 the block's 127 / max is infinite in float: zeros must not come
// back as -max (0 * inf is NaN, which became -127 or -128), nor any value with the wrong
// sign. The whole block goes out as zeros (with error feedback, it is owed).
TEST(Int8Codec, TinyBlockKeepsZerosAndSigns) {
  for (bool stochastic : {true, false}) {
    auto c = makeDenseCodec(spec(CompressKind::Int8, stochastic, 64));
    for (float tiny : {1e-38f, 1e-40f, 3e-37f, 1e-36f}) {
      std::vector<float> x(100, 0.0f);  // a full block of 64 and a partial one (scalar tail)
      x[0] = tiny;
      x[40] = -tiny / 2;
      x[70] = -tiny;
      Rng rng(1);
      auto y = roundTrip(*c, x, rng);
      for (size_t i = 0; i < x.size(); ++i) {
        if (x[i] == 0.0f) ASSERT_EQ(y[i], 0.0f) << "tiny " << tiny << " i " << i << " st " << stochastic;
        ASSERT_GE(x[i] * y[i], 0.0f) << "tiny " << tiny << " i " << i << " st " << stochastic;
        ASSERT_LE(std::fabs(y[i] - x[i]), tiny) << "tiny " << tiny << " i " << i << " st " << stochastic;
      }
    }
  }
}

TEST(Int8Codec, StochasticRoundingIsUnbiased) {
  auto c = makeDenseCodec(spec(CompressKind::Int8, true, 4));
  std::vector<float> x = {1.0f, 0.3f, -0.71f, 0.05f};  // scale 1/127: 0.3 sits between levels
  std::vector<double> mean(4, 0);
  Rng rng(9);
  const int trials = 20000;
  for (int t = 0; t < trials; ++t) {
    auto y = roundTrip(*c, x, rng);
    for (int i = 0; i < 4; ++i) mean[i] += y[i];
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(mean[i] / trials, x[i], 2e-4) << i;
  // Nearest rounding is biased for the same value.
  auto cn = makeDenseCodec(spec(CompressKind::Int8, false, 4));
  auto yn = roundTrip(*cn, x, rng);
  EXPECT_GT(std::fabs(yn[1] - x[1]), 5e-4);  // 0.3*127 = 38.1 rounds to 38
}

// The wire format spelled out: per block the scale max|x|/127, then floor(x * 127/max + u)
// clamped to [-127, 127], u = hash(seed + k) / 2^32 (24 bits) with seed = the next number
// of the codec's Rng per block, or u = 1/2 for nearest rounding. The vector kernel must
// give these bytes exactly; a block holding a NaN or an infinity is sent as zeros.
uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

std::vector<uint8_t> referenceInt8(const std::vector<float>& x, size_t block, bool stochastic, Rng rng) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += block) {
    const size_t m = std::min(block, x.size() - b);
    const uint32_t seed = stochastic ? rng.next() : 0;
    float mx = 0;
    bool finite = true;
    for (size_t k = 0; k < m; ++k) {
      finite = finite && std::isfinite(x[b + k]);
      mx = std::max(mx, std::fabs(x[b + k]));
    }
    const float scale = finite && mx > 0 ? mx / 127.0f : 0.0f;
    const auto* sb = reinterpret_cast<const uint8_t*>(&scale);
    out.insert(out.end(), sb, sb + sizeof(float));
    for (size_t k = 0; k < m; ++k) {
      int q = 0;
      if (scale > 0) {
        float u = stochastic ? static_cast<float>(lowbias32(seed + static_cast<uint32_t>(k)) >> 8) / 16777216.0f : 0.5f;
        float v = x[b + k] * (127.0f / mx);
        float s = std::clamp((v + u) + 128.0f, 1.0f, 255.0f);
        q = static_cast<int>(s) - 128;
      }
      out.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
    }
  }
  return out;
}

TEST(Int8Codec, BytesFollowTheWireFormatExactly) {
  const size_t block = 256, n = 3 * block + 77;  // whole vector steps and a scalar tail
  auto x = randomVec(n, 5, 2.0f);
  x[block + 3] = std::nanf("");
  x[2 * block + 9] = -INFINITY;
  for (bool stochastic : {true, false}) {
    auto c = makeDenseCodec(spec(CompressKind::Int8, stochastic, block));
    Rng rng(77);
    auto want = referenceInt8(x, block, stochastic, rng);
    std::vector<uint8_t> got(c->encodedBytes(n));
    std::vector<float> rt(n);
    c->encode(x.data(), n, got.data(), rt.data(), rng);
    ASSERT_EQ(got, want) << "stochastic=" << stochastic;
    std::vector<float> dec(n);
    c->decode(got.data(), n, dec.data());
    EXPECT_EQ(rt, dec);
    for (size_t k = block; k < 3 * block; ++k) ASSERT_EQ(dec[k], 0.0f) << k;  // the non-finite blocks
  }
}

TEST(CastCodecs, RelativeErrorBounds) {
  auto x = randomVec(513, 3, 10.0f);
  Rng rng(1);
  auto h = roundTrip(*makeDenseCodec(spec(CompressKind::FP16)), x, rng);
  auto b = roundTrip(*makeDenseCodec(spec(CompressKind::BF16)), x, rng);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(h[i] - x[i]), std::fabs(x[i]) * 0x1p-11f + 1e-7f) << i;
    EXPECT_LE(std::fabs(b[i] - x[i]), std::fabs(x[i]) * 0x1p-8f) << i;
  }
}

TEST(TopK, PicksExactlyTheLargestMagnitudes) {
  for (size_t n : {1ul, 7ul, 100ul, 5000ul, 300001ul}) {
    for (double density : {0.001, 0.01, 0.3, 1.0}) {
      auto x = randomVec(n, static_cast<uint32_t>(n));
      size_t k = topkCount(n, density);
      Rng rng(5);
      std::vector<uint32_t> got;
      selectTopK(x.data(), n, k, 100, got, rng);
      ASSERT_EQ(got.size(), k) << n << " " << density;
      std::vector<uint32_t> ref(n);
      std::iota(ref.begin(), ref.end(), 0);
      std::sort(ref.begin(), ref.end(), [&](uint32_t a, uint32_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
      ref.resize(k);
      for (auto& i : ref) i += 100;
      std::sort(ref.begin(), ref.end());
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, ref) << "n=" << n << " density=" << density;
    }
  }
}

// The accumulating scan (vectorised where the CPU has AVX-512) writes back exactly the
// scalar product-then-sum, also past the last full vector, and selects on it. A scale
// that is not a power of two would show a fused multiply-add.
TEST(TopK, AccumulateVariantUpdatesAndSelectsOnTheSum) {
  for (size_t n : {20000ul, 20003ul, 15ul}) {
    for (float scale : {0.5f, 0.37f}) {
      const size_t k = std::max<size_t>(1, n / 130);
      auto res = randomVec(n, 11), grad = randomVec(n, 12);
      std::vector<float> sum(n);
      for (size_t i = 0; i < n; ++i) {
        volatile float p = grad[i] * scale;  // rounded before the sum, as the library does
        sum[i] = res[i] + p;
      }
      Rng r1(4), r2(4);
      std::vector<uint32_t> a, b;
      selectTopK(sum.data(), n, k, 0, a, r1);
      selectTopKAccumulate(res.data(), grad.data(), scale, n, k, 0, b, r2);
      EXPECT_EQ(res, sum) << "n=" << n << " scale=" << scale;  // written back
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      EXPECT_EQ(a, b) << "n=" << n << " scale=" << scale;
    }
  }
}

TEST(TopK, ConcentratedValuesStillFindK) {
  // Most elements zero: the sampled threshold is 0 and must be refined.
  std::vector<float> x(10000, 0.0f);
  x[17] = 5;
  x[9000] = -7;
  Rng rng(3);
  std::vector<uint32_t> got;
  selectTopK(x.data(), x.size(), 2, 0, got, rng);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<uint32_t>{17, 9000}));
  EXPECT_EQ(topkCount(10, 0.01), 1u);
  EXPECT_EQ(topkCount(0, 0.5), 0u);
}

// Runs a compressed allreduce on `ranks` simulated ranks; bufs[r] is rank r's buffer
// (overwritten with the result), one tensor per entry of `sizes`. Dense codecs expect the
// residual already added to bufs (as the executor stages it); top-k reads bufs as the
// raw gradient and folds it into the residual itself.
void runCompressed(int ranks, const CompressionSpec& s, std::vector<std::vector<float>>& bufs,
                   const std::vector<size_t>& sizes, std::vector<std::vector<float>>* residuals,
                   uint64_t seed, size_t chunkElems = 1 << 20) {
  auto world = testing::FakeWorld::create(ranks);
  testing::runRanks(ranks, [&](int r) {
    auto c = world->member(r);
    FusionBuffers fb;
    Rng rng(seed * 31 + r);
    std::vector<CompressedSpan> spans;
    std::vector<TopkTensor> ts;
    size_t off = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      float* res = residuals ? (*residuals)[r].data() + off : nullptr;
      spans.push_back({off, sizes[i], res});
      ts.push_back({bufs[r].data() + off, bufs[r].data() + off, sizes[i], res});
      off += sizes[i];
    }
    if (s.kind == CompressKind::TopK)
      topkAllreduce(*c, s.density, 1.0f, 1.0f, ts, fb, rng);
    else
      denseCompressedAllreduce(*c, *makeDenseCodec(s), bufs[r].data(), bufs[r].size(), spans, fb, rng, chunkElems);
  });
}

TEST(CompressedAllreduce, DenseCodecsCloseToTrueSumAndIdenticalOnAllRanks) {
  const int ranks = 3;
  const std::vector<size_t> sizes = {1000, 37, 4096};
  const size_t n = 1000 + 37 + 4096;
  for (auto kind : {CompressKind::FP16, CompressKind::BF16, CompressKind::Int8}) {
    std::vector<std::vector<float>> in(ranks), bufs(ranks);
    std::vector<float> truth(n, 0);
    for (int r = 0; r < ranks; ++r) {
      in[r] = randomVec(n, 100 + r);
      for (size_t i = 0; i < n; ++i) truth[i] += in[r][i];
      bufs[r] = in[r];
    }
    auto piped = bufs;
    runCompressed(ranks, spec(kind, false, 128), bufs, sizes, nullptr, 1);
    // Pipelined in chunks of 3 blocks per rank. Casts are element-wise, so the result is the
    // same; int8 blocks start at chunk boundaries, so only the error bound holds.
    runCompressed(ranks, spec(kind, false, 128), piped, sizes, nullptr, 1, 3 * 128 * ranks);
    if (kind != CompressKind::Int8) {
      EXPECT_EQ(piped[1], bufs[1]) << "kind " << int(kind);
    }
    double tol = kind == CompressKind::FP16 ? 0.01 : (kind == CompressKind::BF16 ? 0.08 : 0.25);
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(bufs[r], bufs[0]) << "rank " << r << " kind " << int(kind);
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(bufs[r][i], truth[i], tol) << i << " kind " << int(kind);
      EXPECT_EQ(piped[r], piped[0]) << "rank " << r;
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(piped[r][i], truth[i], tol) << i << " kind " << int(kind);
    }
  }
}

// What a sparse top-k all-reduce must deliver: per tensor, the sum over ranks of each
// rank's exactly selected entries (the selection is exact, so the seed does not matter).
std::vector<float> topkSums(const std::vector<std::vector<float>>& bufs, const std::vector<size_t>& sizes,
                            double density) {
  size_t n = 0;
  for (size_t sz : sizes) n += sz;
  std::vector<float> expect(n, 0);
  for (const auto& b : bufs) {
    size_t off = 0;
    for (size_t sz : sizes) {
      Rng rng(1);
      std::vector<uint32_t> idx;
      selectTopK(b.data() + off, sz, topkCount(sz, density), static_cast<uint32_t>(off), idx, rng);
      for (auto i : idx) expect[i] += b[i];
      off += sz;
    }
  }
  return expect;
}

TEST(CompressedAllreduce, TopKSumsSelectedEntriesSparseAndDense) {
  for (double density : {0.01, 0.4}) {  // 0.4 * 3 ranks >= 1: dense fallback
    const int ranks = 3;
    const std::vector<size_t> sizes = {2000, 500};
    const size_t n = 2500;
    std::vector<std::vector<float>> bufs(ranks);
    for (int r = 0; r < ranks; ++r) bufs[r] = randomVec(n, 200 + r);
    const std::vector<float> expect = topkSums(bufs, sizes, density);
    runCompressed(ranks, spec(CompressKind::TopK, false, 0, density), bufs, sizes, nullptr, 2);
    for (int r = 0; r < ranks; ++r)
      for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(bufs[r][i], expect[i]) << "density " << density << " i " << i;
  }
}

// Enough pairs for the sparse exchange to go out in several groups (each at least 32 Ki
// pairs, about a quarter of the total): the sums are the same as sent in one piece, on
// every rank, across the group boundaries (a 7-element tensor sits inside a group).
TEST(CompressedAllreduce, TopKInSeveralGroupsSumsEveryGroup) {
  const int ranks = 2;
  const double density = 0.25;
  const std::vector<size_t> sizes = {300000, 7, 200000, 150000, 50000};
  size_t n = 0;
  for (size_t sz : sizes) n += sz;
  std::vector<std::vector<float>> bufs(ranks);
  for (int r = 0; r < ranks; ++r) bufs[r] = randomVec(n, 300 + r);
  const std::vector<float> expect = topkSums(bufs, sizes, density);
  runCompressed(ranks, spec(CompressKind::TopK, false, 0, density), bufs, sizes, nullptr, 3);
  size_t nonzero = 0;
  for (size_t i = 0; i < n; ++i) nonzero += expect[i] != 0.0f;
  EXPECT_GT(nonzero, n / 3);  // the sparse path, not the dense fallback (union < n)
  for (int r = 0; r < ranks; ++r)
    for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(bufs[r][i], expect[i]) << "rank " << r << " i " << i;
}

// Error feedback: what was delivered over k steps plus what the ranks still owe equals
// the true sum of gradients, so the delivered sum converges to the true one (its
// average error shrinks like 1/k). Without error feedback top-k loses the small
// entries for good.
TEST(CompressedAllreduce, ErrorFeedbackConverges) {
  const int ranks = 2, steps = 60;
  const size_t n = 600;
  for (auto kind : {CompressKind::TopK, CompressKind::Int8}) {
    double errWithEf = 0;
    for (bool ef : {true, false}) {
      CompressionSpec s = spec(kind, true, 64, 0.05);
      std::vector<std::vector<float>> residual(ranks, std::vector<float>(n, 0));
      std::vector<double> delivered(n, 0), truth(n, 0);
      double err10 = 0;
      for (int t = 0; t < steps; ++t) {
        std::vector<std::vector<float>> bufs(ranks);
        for (int r = 0; r < ranks; ++r) {
          // A fixed per-element mean plus noise: small entries matter in the long run.
          auto g = randomVec(n, 1000 * t + r, 0.1f);
          for (size_t i = 0; i < n; ++i) g[i] += 0.01f * static_cast<float>(i % 7);
          for (size_t i = 0; i < n; ++i) truth[i] += g[i];
          bufs[r] = g;
          if (ef && kind != CompressKind::TopK)
            for (size_t i = 0; i < n; ++i) bufs[r][i] += residual[r][i];
        }
        s.errorFeedback = ef;
        runCompressed(ranks, s, bufs, {n}, ef ? &residual : nullptr, 7 + t);
        for (size_t i = 0; i < n; ++i) delivered[i] += bufs[0][i];
        if (t == 9) {
          for (size_t i = 0; i < n; ++i) err10 = std::max(err10, std::fabs(delivered[i] - truth[i]));
        }
      }
      double errK = 0, owed = 0;
      for (size_t i = 0; i < n; ++i) {
        double res = 0;
        for (int r = 0; r < ranks; ++r) res += residual[r][i];
        errK = std::max(errK, std::fabs(delivered[i] - truth[i]));
        if (ef) owed = std::max(owed, std::fabs(delivered[i] + res - truth[i]));
      }
      SCOPED_TRACE(::testing::Message() << "kind " << int(kind) << " ef " << ef << " err10 " << err10
                                        << " err" << steps << " " << errK);
      if (ef) {
        EXPECT_LT(owed, 1e-3);              // delivered + owed == truth (float rounding only)
        EXPECT_LT(errK, 1.5 * err10 + 1e-3);  // bounded: does not grow with k
        errWithEf = errK;
      } else {
        // Without feedback the error keeps growing: linearly for top-k (small entries are
        // never sent), like a random walk for unbiased stochastic int8.
        EXPECT_GT(errK, (kind == CompressKind::TopK ? 2.5 : 1.5) * err10);
        EXPECT_GT(errK, 3 * errWithEf);
      }
    }
  }
}

// A NaN or infinity in one step's gradient: its int8 block goes out as zeros in that
// step, but the residual must stay finite. Owed, the NaN would make the block
// non-finite (sent as zeros) at every later step: the block would never arrive again.
TEST(CompressedAllreduce, Int8NonFiniteGradientIsNotOwedForever) {
  const int ranks = 2;
  const size_t n = 256;
  CompressionSpec s = spec(CompressKind::Int8, false, 64);
  s.errorFeedback = true;
  std::vector<std::vector<float>> residual(ranks, std::vector<float>(n, 0));
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> bufs(ranks);
    for (int r = 0; r < ranks; ++r) {
      bufs[r].assign(n, 1.0f);
      if (step == 0 && r == 0) {
        bufs[r][3] = std::numeric_limits<float>::quiet_NaN();
        bufs[r][70] = std::numeric_limits<float>::infinity();
      }
      for (size_t i = 0; i < n; ++i) bufs[r][i] += residual[r][i];
    }
    runCompressed(ranks, s, bufs, {n}, &residual, 5 + step);
    for (int r = 0; r < ranks; ++r)
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(residual[r][i])) << "step " << step << " rank " << r << " i " << i;
    if (step > 0)  // both ranks' 1.0 (and what rank 0 owed) arrive again
      for (size_t i = 0; i < n; ++i) ASSERT_GE(bufs[1][i], 1.9f) << "step " << step << " i " << i;
  }
}

// Top-k never selects a NaN; with error feedback a NaN gradient entry must not stay in
// the residual, or that element is never sent again (its later gradients vanish).
TEST(CompressedAllreduce, TopKNanGradientIsNotOwedForever) {
  const int ranks = 2;
  const size_t n = 1000;  // 62 vector steps of 16 and a scalar tail
  CompressionSpec s = spec(CompressKind::TopK, false, 0, 0.01);
  s.errorFeedback = true;
  std::vector<std::vector<float>> residual(ranks, std::vector<float>(n, 0));
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> bufs(ranks, std::vector<float>(n));
    for (int r = 0; r < ranks; ++r) {
      for (size_t i = 0; i < n; ++i) bufs[r][i] = 0.001f * static_cast<float>(i);
      bufs[r][7] = bufs[r][995] = 100.0f;
      if (step == 0 && r == 0) bufs[r][7] = bufs[r][995] = std::numeric_limits<float>::quiet_NaN();
    }
    runCompressed(ranks, s, bufs, {n}, &residual, 9 + step);
    for (int r = 0; r < ranks; ++r)
      for (size_t i = 0; i < n; ++i) ASSERT_FALSE(std::isnan(residual[r][i])) << "step " << step << " rank " << r << " i " << i;
    for (size_t i : {size_t{7}, size_t{995}})
      for (int r = 0; r < ranks; ++r) EXPECT_EQ(bufs[r][i], step == 0 ? 100.0f : 200.0f) << "step " << step << " i " << i;
  }
}

// A quantization block far larger than the tensor: the buffers and the bytes on the wire
// follow the data, not the block (block_size 1 << 24 for 10 floats asked for 192 MB;
// near INT_MAX, tens of GB, and the failed allocation stopped the engine).
TEST(CompressedAllreduce, Int8BlockLargerThanTheTensorIsNotPaddedOut) {
  const int ranks = 2;
  const size_t n = 10;
  auto world = testing::FakeWorld::create(ranks);
  std::vector<size_t> bytes(ranks);
  std::vector<std::vector<float>> bufs(ranks, std::vector<float>(n));
  testing::runRanks(ranks, [&](int r) {
    auto c = world->member(r);
    FusionBuffers fb;
    Rng rng(r + 1);
    for (size_t i = 0; i < n; ++i) bufs[r][i] = static_cast<float>(r + 1 + i);
    auto codec = makeDenseCodec(spec(CompressKind::Int8, false, 1 << 24));
    denseCompressedAllreduce(*c, *codec, bufs[r].data(), n, {{0, n, nullptr}}, fb, rng, 1 << 20);
    bytes[r] = fb.totalBytes();
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_LT(bytes[r], 4096u) << "rank " << r;
    EXPECT_EQ(bufs[r], bufs[0]);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(bufs[r][i], 3.0f + 2.0f * i, 0.2f) << i;
  }
}

}  // namespace
}  // namespace coll::engine
