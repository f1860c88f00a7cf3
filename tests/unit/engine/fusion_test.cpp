// Fusion policy, buffer storage and copies.
#include <gtest/gtest.h>

#include <cmath>

#include <cstring>

#include "base/error.hpp"
#include "base/reduce.hpp"
#include "engine/fusion_buffer.hpp"
#include "engine/fusion_copy.hpp"
#include "engine/fusion_policy.hpp"

namespace coll::engine {
namespace {

Response ar(const std::string& name, int64_t n, collDataType_t dt = collFloat32) {
  Response r;
  r.meta.name = name;
  r.meta.op = OpType::Allreduce;
  r.meta.dtype = dt;
  r.meta.shape = {n};
  return r;
}

std::vector<std::vector<size_t>> members(const std::vector<FusionGroup>& gs) {
  std::vector<std::vector<size_t>> out;
  for (const auto& g : gs) out.push_back(g.members);
  return out;
}

TEST(FusionPolicy, FusesCompatibleUpToThreshold) {
  std::vector<Response> rs = {ar("a", 10), ar("b", 10), ar("c", 10), ar("d", 10)};
  FusionParams p;
  p.thresholdBytes = 80;  // two float tensors of 40 bytes each
  auto g = planFusion(rs, p);
  EXPECT_EQ(members(g), (std::vector<std::vector<size_t>>{{0, 1}, {2, 3}}));
  EXPECT_TRUE(g[0].useBuffer);
  EXPECT_EQ(g[0].bytes, 80u);
}

TEST(FusionPolicy, KeepsIncompatibleApartButLooksAhead) {
  auto x = ar("x", 4, collInt32);
  auto y = ar("y", 4);
  y.meta.redOp = collMax;
  auto z = ar("z", 4);
  z.meta.prescale = 2;
  auto b = ar("bc", 4);
  b.meta.op = OpType::Broadcast;
  auto e = ar("err", 4);
  e.error = true;
  auto g = ar("gather", 4);
  g.meta.op = OpType::Allgather;
  std::vector<Response> rs = {ar("a", 4), x, y, z, ar("b", 4), b, e, g, ar("c", 4)};
  auto plan = planFusion(rs, FusionParams{});
  EXPECT_EQ(members(plan), (std::vector<std::vector<size_t>>{{0, 4, 8}, {1}, {2}, {3}, {5}, {6}, {7}}));
  // Singletons run in place.
  for (size_t i = 1; i < plan.size(); ++i) EXPECT_FALSE(plan[i].useBuffer) << i;
}

TEST(FusionPolicy, LargeTensorsRunDirectAndCompressionAlwaysStages) {
  std::vector<Response> rs = {ar("small", 10), ar("big", 1000), ar("small2", 10)};
  FusionParams p;
  p.directBytes = 1000;
  auto plan = planFusion(rs, p);
  EXPECT_EQ(members(plan), (std::vector<std::vector<size_t>>{{0, 2}, {1}}));
  EXPECT_FALSE(plan[1].useBuffer);
  rs[1].meta.compression.kind = CompressKind::FP16;
  plan = planFusion(rs, p);
  EXPECT_EQ(members(plan), (std::vector<std::vector<size_t>>{{0, 2}, {1}}));
  EXPECT_TRUE(plan[1].useBuffer);
  // Bigger than the threshold: alone.
  p.thresholdBytes = 64;
  p.directBytes = 0;
  rs = {ar("a", 8), ar("b", 100), ar("c", 8)};
  plan = planFusion(rs, p);
  EXPECT_EQ(members(plan), (std::vector<std::vector<size_t>>{{0, 2}, {1}}));
}

// Top-k tensors fuse only while the group's elements fit the 32-bit indices the exchange
// sends (each tensor alone is held under that when it is submitted).
TEST(FusionPolicy, TopkGroupsStayWithin32BitIndices) {
  const int64_t big = int64_t{3} << 30;  // 3 Gi elements: two of them pass 2^32
  std::vector<Response> rs = {ar("a", big, collInt8), ar("b", big, collInt8), ar("c", 1000, collInt8)};
  for (auto& r : rs) r.meta.compression.kind = CompressKind::TopK;
  FusionParams p;
  p.thresholdBytes = size_t{1} << 40;
  EXPECT_EQ(members(planFusion(rs, p)), (std::vector<std::vector<size_t>>{{0, 2}, {1}}));
  for (auto& r : rs) r.meta.compression.kind = CompressKind::None;  // no such bound
  EXPECT_EQ(members(planFusion(rs, p)), (std::vector<std::vector<size_t>>{{0, 1, 2}}));
}

TEST(FusionBuffer, GrowsAlignedAndZeros) {
  FusionBuffers b;
  void* p = b.get(BufferSlot::Fused, 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_GE(b.capacity(BufferSlot::Fused), 100u);
  EXPECT_EQ(b.get(BufferSlot::Fused, 50), p);  // reused
  void* q = b.get(BufferSlot::Fused, 1000);
  EXPECT_GE(b.capacity(BufferSlot::Fused), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
  auto z = b.zeros(333);
  for (int i = 0; i < 333; ++i) ASSERT_EQ(static_cast<const uint8_t*>(z.get())[i], 0) << i;
  EXPECT_EQ(b.zeros(100), z);  // reused
  // A larger request replaces the shared zeros; a holder of the old ones keeps them.
  auto big = b.zeros(5000);
  EXPECT_GE(b.zerosCapacity(), 5000u);
  EXPECT_NE(big, z);
  for (int i = 0; i < 333; ++i) ASSERT_EQ(static_cast<const uint8_t*>(z.get())[i], 0) << i;
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(static_cast<const uint8_t*>(big.get())[i], 0) << i;
}

TEST(FusionCopy, ScalesPerType) {
  float f[3] = {1, 2, 3}, fo[3];
  scaledCopy(fo, f, 3, collFloat32, 0.5);
  EXPECT_EQ(fo[2], 1.5f);
  double d[2] = {1, -4}, dout[2];
  scaledCopy(dout, d, 2, collFloat64, 0.25);
  EXPECT_EQ(dout[1], -1.0);
  uint16_t h[2] = {floatToHalf(3.0f), floatToHalf(-1.0f)};
  scaledCopy(h, h, 2, collFloat16, 2.0);  // in place
  EXPECT_EQ(halfToFloat(h[0]), 6.0f);
  EXPECT_EQ(halfToFloat(h[1]), -2.0f);
  uint16_t bf[1] = {floatToBf16(5.0f)};
  scaledCopy(bf, bf, 1, collBfloat16, 0.5);
  EXPECT_EQ(bf16ToFloat(bf[0]), 2.5f);
  int32_t i[2] = {7, 8}, io[2];
  scaledCopy(io, i, 2, collInt32, 1.0);
  EXPECT_EQ(io[1], 8);
  EXPECT_THROW(scaledCopy(io, i, 2, collInt32, 2.0), Error);
}

TEST(FusionCopy, StageWithResidual) {
  float src[3] = {1, 2, 3}, res[3] = {0.5f, 0, -1}, dst[3];
  floatStageIn(dst, src, 3, 2.0f, res);
  EXPECT_EQ(dst[0], 2.5f);
  EXPECT_EQ(dst[2], 5.0f);
  floatStageOut(dst, src, 3, 0.5f);
  EXPECT_EQ(dst[1], 1.0f);
}

// COLL_FUSION_DIRECT_BYTES=auto: alone from alpha * copy bandwidth / 2, as a power of two.
TEST(FusionPolicy, AutomaticDirectThresholdFollowsLatency) {
  EXPECT_EQ(directLog2ForLatency(3.0), 14);     // 12 kB: shared memory
  EXPECT_EQ(directLog2ForLatency(12.0), 16);    // 48 kB: TCP over loopback
  EXPECT_EQ(directLog2ForLatency(1000.0), 22);  // 4 MB: a 1 ms network
  EXPECT_EQ(directLog2ForLatency(0.01), kDirectLog2Min);
  EXPECT_EQ(directLog2ForLatency(-1.0), kDirectLog2Min);
  EXPECT_EQ(directLog2ForLatency(std::nan("")), kDirectLog2Min);
  EXPECT_EQ(directLog2ForLatency(1e12), kDirectLog2Max);
  EXPECT_EQ(directBytesFromLog2(14), size_t{16384});
  EXPECT_EQ(directBytesFromLog2(kDirectUnknown), kDirectBytesFallback);
  EXPECT_EQ(directBytesFromLog2(100), size_t{1} << kDirectLog2Max);
  EXPECT_EQ(directBytesFromLog2(0), size_t{1} << kDirectLog2Min);
}

}  // namespace
}  // namespace coll::engine
