// Mixed precision: the 16-bit conversions against their definition, dynamic loss scaling,
// and 2-rank training in bf16 and fp16 against float32 on a small synthetic set.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "precision.hpp"
#include "rank_threads.hpp"
#include "rng.hpp"
#include "synthetic_data.hpp"
#include "train/trainer.hpp"

namespace collective::frontend {
namespace {

float floatOf(uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// The value of every finite 16-bit pattern converts back to the same pattern, and a
// random float goes to a nearest representable value (ties: the even mantissa).
template <typename To, typename From>
void checkNearest(To to, From from, uint16_t maxFinite) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if ((bits & 0x7fff) > maxFinite) continue;
    ASSERT_EQ(to(from(bits)), bits) << std::hex << h;
  }
  Rng rng(3);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng.below(1u << 31)) | (i % 2 ? 0x80000000u : 0);
    const float v = floatOf(u);
    if (!std::isfinite(v)) continue;
    const uint16_t r = to(v);
    const float got = from(r);
    if (std::isinf(got)) continue;  // overflow: checked below
    // Neighbours of r toward and away from zero.
    const float down = (r & 0x7fff) ? from(static_cast<uint16_t>(r - 1)) : got;
    const float up = from(static_cast<uint16_t>(r + 1));
    const double err = std::abs(static_cast<double>(v) - got);
    ASSERT_LE(err, std::abs(static_cast<double>(v) - down)) << v;
    if (std::isfinite(up)) ASSERT_LE(err, std::abs(static_cast<double>(v) - up)) << v;
    if (err == std::abs(static_cast<double>(v) - down) && down != got)
      ASSERT_EQ(r & 1, 0) << "tie not to even at " << v;
  }
}

TEST(Precision, BFloat16IsRoundToNearestEven) {
  checkNearest(floatToBf16, bf16ToFloat, 0x7f7f);
  EXPECT_EQ(floatToBf16(1.0f + 1.0f / 256), floatToBf16(1.0f));  // tie to even
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(bf16ToFloat(floatToBf16(std::numeric_limits<float>::max()))));
}

TEST(Precision, Float16IsRoundToNearestEven) {
  checkNearest(floatToFp16, fp16ToFloat, 0x7bff);
  EXPECT_EQ(fp16ToFloat(floatToFp16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(fp16ToFloat(floatToFp16(65520.0f))));  // tie rounds up to inf
  EXPECT_EQ(fp16ToFloat(floatToFp16(65519.0f)), 65504.0f);
  EXPECT_EQ(fp16ToFloat(floatToFp16(5.9604645e-8f)), 5.9604645e-8f);  // smallest subnormal
  EXPECT_EQ(fp16ToFloat(floatToFp16(2.0e-8f)), 0.0f);                 // underflow
  EXPECT_TRUE(std::isnan(fp16ToFloat(floatToFp16(std::nanf("")))));
  EXPECT_THROW(parsePrecision("fp8"), std::exception);
}

// The vectorised in-place rounding (F16C, branch-free bf16) equals the scalar conversions.
TEST(Precision, RoundInPlaceEqualsScalarConversion) {
  Rng rng(8);
  std::vector<float> v(4099);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = floatOf(static_cast<uint32_t>(rng.below(1ull << 32)));
  v[0] = std::nanf("");
  v[1] = std::numeric_limits<float>::infinity();
  v[2] = 65519.0f;
  v[3] = 3e-6f;
  for (Precision p : {Precision::BFloat16, Precision::Float16}) {
    std::vector<float> r = v, back(v.size());
    roundInPlace(p, r.data(), static_cast<int64_t>(r.size()));
    std::vector<uint16_t> bits(v.size());
    toBits(p, v.data(), bits.data(), static_cast<int64_t>(v.size()));
    fromBits(p, bits.data(), back.data(), static_cast<int64_t>(v.size()), 1.0f);
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = p == Precision::BFloat16 ? bf16ToFloat(floatToBf16(v[i]))
                                                   : fp16ToFloat(floatToFp16(v[i]));
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(r[i]) && std::isnan(back[i])) << i;
      } else {
        ASSERT_EQ(r[i], want) << precisionName(p) << " at " << i << ": " << v[i];
        ASSERT_EQ(back[i], want) << precisionName(p) << " bits at " << i << ": " << v[i];
      }
    }
  }
}

TEST(MixedPrecision, LossScaleSkipsOverflowsAndGrows) {
  Param p{"w", Tensor::fromVector({2}, {1.0f, 2.0f}), Tensor({2})};
  MixedPrecision mp({&p}, Precision::Float16, {1024.0f, 3, 1.0f});
  EXPECT_EQ(mp.lossScale(), 1024.0f);
  p.grad[0] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(mp.unscaleAndCheck());
  EXPECT_EQ(mp.lossScale(), 512.0f);
  EXPECT_EQ(mp.skippedSteps(), 1);
  for (int i = 0; i < 3; ++i) {
    p.grad[0] = 512.0f;
    p.grad[1] = -256.0f;
    EXPECT_TRUE(mp.unscaleAndCheck());
    EXPECT_EQ(p.grad[0], 1.0f);
    EXPECT_EQ(p.grad[1], -0.5f);
  }
  EXPECT_EQ(mp.lossScale(), 1024.0f);  // 3 good steps in a row
  // The compute copy is rounded, the master comes back unchanged.
  p.value[0] = 1.0f + 1.0f / 4096;
  mp.castParameters();
  EXPECT_EQ(p.value[0], 1.0f);
  mp.restoreMaster();
  EXPECT_EQ(p.value[0], 1.0f + 1.0f / 4096);
}

struct RunResult {
  double accuracy = 0;
  int64_t bytesPerStep = 0;
  std::vector<std::vector<float>> params[2];
};

RunResult train(const std::string& precision, const Dataset& data, const Dataset& test) {
  TrainOptions o = TrainOptions::parse({"--precision", precision, "--epochs", "1",
                                        "--lr-schedule", "constant"});
  o.progress = false;
  RunResult out;
  std::mutex mu;
  testing::runRanks(2, [&](int rank, collComm_t world) {
    OwnedComm aux = OwnedComm::duplicate(world);
    auto ctx = hvd::Context::from_comm(world, false);
    {
      Trainer t(o, *ctx, aux.get(), data, test, nullptr);
      const auto r = t.run();
      std::lock_guard<std::mutex> lock(mu);
      for (Param* p : t.model().parameters()) out.params[rank].push_back(p->value.toVector());
      if (rank == 0) {
        out.accuracy = r.at(0).testAccuracy;
        out.bytesPerStep = t.optimizer().bytesPerStep();
      }
    }
    ctx->shutdown();
  });
  return out;
}

TEST(MixedPrecision, TwoRanksTrainLikeFloat32) {
  const Dataset data = testing::patchData(1280, 5), test = testing::patchData(400, 6);
  const RunResult f32 = train("fp32", data, test);
  EXPECT_GE(f32.accuracy, 0.9);
  for (const char* p : {"bf16", "fp16"}) {
    const RunResult r = train(p, data, test);
    EXPECT_EQ(r.params[0], r.params[1]) << p << ": replicas differ";
    EXPECT_GE(r.accuracy, f32.accuracy - 0.03) << p;
    EXPECT_EQ(2 * r.bytesPerStep, f32.bytesPerStep) << p;
  }
}

}  // namespace
}  // namespace collective::frontend
