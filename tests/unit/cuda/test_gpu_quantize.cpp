// int8 block quantization on the GPU against the engine's CPU codec: nearest rounding
// gives the same bytes (the wire format is shared), decoding gives the same floats, and
// stochastic rounding stays within one step of the input without a visible bias.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda/kernels.hpp"
#include "engine/compression/codec.hpp"
#include "engine/request.hpp"
#include "gpu_util.hpp"

namespace {

std::vector<float> gradients(size_t n, size_t block) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = g(rng) * std::pow(10.0f, static_cast<float>(static_cast<int>(i / block % 7) - 3));
  // An all-zero block and one with a subnormal scale. (No Inf or NaN here: the CPU codec
  // then converts NaN to an integer, which C++ leaves undefined; see NonFiniteBlock.)
  for (size_t i = 0; i < block && 2 * block <= n; ++i) v[block + i] = 0.0f;
  for (size_t i = 0; i < block && 5 * block <= n; ++i) v[4 * block + i] = 1e-37f * static_cast<float>(i % 5);
  return v;
}

std::unique_ptr<coll::engine::DenseCodec> cpuCodec(size_t block, bool stochastic) {
  coll::engine::CompressionSpec spec;
  spec.kind = coll::engine::CompressKind::Int8;
  spec.blockSize = static_cast<int32_t>(block);
  spec.stochastic = stochastic;
  return coll::engine::makeInt8Codec(spec);
}

TEST(GpuQuantize, NearestRoundingMatchesTheCpuCodecByteForByte) {
  COLL_REQUIRE_GPU();
  for (size_t block : {size_t{256}, size_t{100}, size_t{33}, size_t{1}}) {
    const size_t n = 100'017;
    const auto x = gradients(n, block);
    const auto codec = cpuCodec(block, false);
    std::vector<uint8_t> ref(codec->encodedBytes(n));
    coll::engine::Rng rng(1);
    codec->encode(x.data(), n, ref.data(), nullptr, rng);
    ASSERT_EQ(coll::cuda::int8EncodedBytes(n, block), ref.size());
    gputest::DeviceMemory dx(n * 4), dq(ref.size()), dy(n * 4);
    dx.upload(x);
    coll::cuda::int8Quantize(dx.as<float>(), n, block, false, 0, dq.as<uint8_t>(), nullptr);
    const auto got = dq.download<uint8_t>(ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(got[i], ref[i]) << "block " << block << " byte " << i << " (quantization block "
                                << i / (block + 4) << ")";
    // Decoding (and decode-and-add) gives the CPU's floats.
    std::vector<float> dec(n), acc(x);
    codec->decode(ref.data(), n, dec.data());
    codec->decodeAdd(ref.data(), n, acc.data());
    coll::cuda::int8Dequantize(dq.as<uint8_t>(), n, block, dy.as<float>(), false, nullptr);
    EXPECT_EQ(std::memcmp(dy.download<float>(n).data(), dec.data(), n * 4), 0) << "decode, block " << block;
    dy.upload(x);
    coll::cuda::int8Dequantize(dq.as<uint8_t>(), n, block, dy.as<float>(), true, nullptr);
    EXPECT_EQ(std::memcmp(dy.download<float>(n).data(), acc.data(), n * 4), 0) << "decodeAdd, block " << block;
  }
}

TEST(GpuQuantize, NonFiniteBlockIsSentAsZerosAndSparesTheOthers) {
  COLL_REQUIRE_GPU();
  const size_t n = 1024, block = 256;
  auto x = gradients(n, block);
  x[block / 2] = std::numeric_limits<float>::infinity();
  gputest::DeviceMemory dx(n * 4), dq(coll::cuda::int8EncodedBytes(n, block)), dy(n * 4);
  dx.upload(x);
  coll::cuda::int8Quantize(dx.as<float>(), n, block, false, 0, dq.as<uint8_t>(), nullptr);
  coll::cuda::int8Dequantize(dq.as<uint8_t>(), n, block, dy.as<float>(), false, nullptr);
  const auto q = dq.download<uint8_t>(dq.bytes());
  const auto y = dy.download<float>(n);
  float scale0;
  std::memcpy(&scale0, q.data(), 4);
  EXPECT_EQ(scale0, 0.0f);
  for (size_t i = 0; i < block; ++i) ASSERT_EQ(y[i], 0.0f) << i;
  for (size_t i = 2 * block; i < n; ++i) {  // block 1 is all zeros by construction
    float scale;
    std::memcpy(&scale, &q[i / block * (block + 4)], 4);
    ASSERT_LE(std::fabs(y[i] - x[i]), scale * 0.5001f) << i;
  }
}

TEST(GpuQuantize, StochasticRoundingIsWithinOneStepAndUnbiased) {
  COLL_REQUIRE_GPU();
  const size_t n = 1 << 20, block = 256;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = u(rng);
  gputest::DeviceMemory dx(n * 4), dq(coll::cuda::int8EncodedBytes(n, block)), dy(n * 4);
  dx.upload(x);
  coll::cuda::int8Quantize(dx.as<float>(), n, block, true, 1234, dq.as<uint8_t>(), nullptr);
  coll::cuda::int8Dequantize(dq.as<uint8_t>(), n, block, dy.as<float>(), false, nullptr);
  const auto y = dy.download<float>(n);
  const auto q = dq.download<uint8_t>(dq.bytes());
  double bias = 0;
  for (size_t i = 0; i < n; ++i) {
    float scale;
    std::memcpy(&scale, &q[i / block * (block + 4)], 4);
    ASSERT_LT(std::fabs(y[i] - x[i]), scale * 1.0001f) << i;
    bias += (y[i] - x[i]) / scale;
  }
  // Unbiased: the mean error in steps is ~N(0, 0.3/sqrt(n)); 0.01 is over 30 sigma.
  EXPECT_LT(std::fabs(bias / n), 0.01);
  // Another seed gives other noise.
  coll::cuda::int8Quantize(dx.as<float>(), n, block, true, 99, dq.as<uint8_t>(), nullptr);
  EXPECT_NE(dq.download<uint8_t>(dq.bytes()), q);
}

}  // namespace
