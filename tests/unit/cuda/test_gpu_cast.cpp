// float32 <-> float16 / bfloat16 casts against the CPU conversions, bit for bit:
// all 65536 patterns one way, rounding-boundary and random floats the other.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/reduce.hpp"
#include "cuda/kernels.hpp"
#include "gpu_util.hpp"

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<float> floatSamples() {
  std::vector<float> v;
  const uint32_t lows[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x7fff, 0x8000, 0x8001, 0xffff};
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t e = 0; e < 256; ++e)
      for (uint32_t top = 0; top < 128; top += 3)
        for (uint32_t low : lows) {
          const uint32_t u = (sign << 31) | (e << 23) | (top << 16) | low;
          float f;
          std::memcpy(&f, &u, 4);
          v.push_back(f);
        }
  std::mt19937 rng(7);
  for (int i = 0; i < (1 << 20); ++i) {
    const uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  }
  return v;
}

TEST(GpuCast, WideningEveryPatternMatchesCpu) {
  COLL_REQUIRE_GPU();
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  gputest::DeviceMemory src(all.size() * 2), dst(all.size() * 4);
  src.upload(all);
  coll::cuda::halfToFloat(dst.as<float>(), src.as<uint16_t>(), all.size(), nullptr);
  auto half = dst.download<float>(all.size());
  coll::cuda::bf16ToFloat(dst.as<float>(), src.as<uint16_t>(), all.size(), nullptr);
  auto bf = dst.download<float>(all.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    ASSERT_EQ(bitsOf(half[i]), bitsOf(coll::halfToFloat(static_cast<uint16_t>(i)))) << std::hex << i;
    ASSERT_EQ(bitsOf(bf[i]), bitsOf(coll::bf16ToFloat(static_cast<uint16_t>(i)))) << std::hex << i;
  }
}

TEST(GpuCast, NarrowingMatchesCpuIncludingNanPayloadsAndTies) {
  COLL_REQUIRE_GPU();
  const std::vector<float> v = floatSamples();
  gputest::DeviceMemory src(v.size() * 4), dst(v.size() * 2);
  src.upload(v);
  coll::cuda::floatToHalf(dst.as<uint16_t>(), src.as<float>(), v.size(), nullptr);
  auto half = dst.download<uint16_t>(v.size());
  coll::cuda::floatToBf16(dst.as<uint16_t>(), src.as<float>(), v.size(), nullptr);
  auto bf = dst.download<uint16_t>(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(half[i], coll::floatToHalf(v[i])) << std::hex << bitsOf(v[i]);
    ASSERT_EQ(bf[i], coll::floatToBf16(v[i])) << std::hex << bitsOf(v[i]);
  }
}

}  // namespace
