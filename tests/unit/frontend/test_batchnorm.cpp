// BatchNorm (single process): statistics, running estimates, eval mode, gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.hpp"
#include "gradcheck.hpp"
#include "layers/batchnorm.hpp"

namespace collective::frontend {
namespace {

using testing::checkLayerGradients;
using testing::GradTolerance;
using testing::randomTensor;

void randomAffine(BatchNorm& bn, uint64_t seed) {
  auto p = bn.parameters();
  Rng rng(seed);
  for (float& v : p[0]->value.span()) v = rng.uniform(0.5f, 1.5f);
  for (float& v : p[1]->value.span()) v = rng.uniform(-0.5f, 0.5f);
}

// Per-channel mean and biased variance in double, straight from the definition.
void channelMoments(const Tensor& x, int64_t c, double& mean, double& var) {
  const int64_t C = x.dim(1), len = x.ndim() == 4 ? x.dim(2) * x.dim(3) : 1;
  double s = 0, ss = 0;
  const int64_t n = x.dim(0) * len;
  for (int64_t b = 0; b < x.dim(0); ++b)
    for (int64_t i = 0; i < len; ++i) s += x[(b * C + c) * len + i];
  mean = s / n;
  for (int64_t b = 0; b < x.dim(0); ++b)
    for (int64_t i = 0; i < len; ++i) {
      const double d = x[(b * C + c) * len + i] - mean;
      ss += d * d;
    }
  var = ss / n;
}

TEST(BatchNorm, TrainForwardNormalisesEachChannel) {
  BatchNorm bn("bn", 3);
  randomAffine(bn, 1);
  const Tensor x = randomTensor({4, 3, 5, 2}, 2, -2.0f, 3.0f);
  const Tensor y = bn.forward(x);
  auto p = bn.parameters();
  for (int64_t c = 0; c < 3; ++c) {
    double mean, var;
    channelMoments(x, c, mean, var);
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t i = 0; i < 10; ++i) {
        const int64_t at = (b * 3 + c) * 10 + i;
        const double want =
            (x[at] - mean) / std::sqrt(var + 1e-5) * p[0]->value[c] + p[1]->value[c];
        ASSERT_NEAR(y[at], want, 1e-5) << "channel " << c;
      }
  }
}

TEST(BatchNorm, RunningStatisticsUseUnbiasedVariance) {
  BatchNorm bn("bn", 2, 1e-5, 0.1);
  const Tensor x = randomTensor({3, 2, 2, 2}, 4, -1.0f, 2.0f);
  bn.forward(x);
  auto bufs = bn.buffers();
  for (int64_t c = 0; c < 2; ++c) {
    double mean, var;
    channelMoments(x, c, mean, var);
    const double n = 12;
    EXPECT_NEAR(bufs[0]->value[c], 0.1 * mean, 1e-6);
    EXPECT_NEAR(bufs[1]->value[c], 0.9 + 0.1 * var * n / (n - 1), 1e-6);
  }
}

TEST(BatchNorm, EvalUsesRunningStatistics) {
  BatchNorm bn("bn", 2);
  auto bufs = bn.buffers();
  bufs[0]->value[0] = 1.0f;
  bufs[0]->value[1] = -2.0f;
  bufs[1]->value[0] = 4.0f;
  bufs[1]->value[1] = 0.25f;
  bn.setTraining(false);
  const Tensor x = Tensor::fromVector({1, 2}, {3.0f, -1.0f});
  const Tensor y = bn.forward(x);
  EXPECT_NEAR(y[0], (3.0 - 1.0) / std::sqrt(4.0 + 1e-5), 1e-6);
  EXPECT_NEAR(y[1], (-1.0 + 2.0) / std::sqrt(0.25 + 1e-5), 1e-5);
  EXPECT_EQ(bufs[0]->value[0], 1.0f) << "eval mode must not update running statistics";
}

TEST(BatchNorm, TrainBackward2dMatchesNumericalGradient) {
  BatchNorm bn("bn", 3);
  randomAffine(bn, 3);
  checkLayerGradients(bn, randomTensor({3, 3, 3, 2}, 6), GradTolerance{1e-3, 2e-3, 2e-2, 150});
}

TEST(BatchNorm, TrainBackward1dMatchesNumericalGradient) {
  BatchNorm bn("bn", 4);
  randomAffine(bn, 4);
  checkLayerGradients(bn, randomTensor({6, 4}, 7), GradTolerance{1e-3, 2e-3, 2e-2, 150});
}

TEST(BatchNorm, EvalBackwardMatchesNumericalGradient) {
  BatchNorm bn("bn", 3);
  randomAffine(bn, 5);
  bn.forward(randomTensor({4, 3, 2, 2}, 8));  // gives non-trivial running statistics
  bn.setTraining(false);
  checkLayerGradients(bn, randomTensor({2, 3, 2, 2}, 9), GradTolerance{1e-3, 2e-3, 2e-2, 150});
}

TEST(BatchNorm, TrainingNeedsMoreThanOneValuePerChannel) {
  BatchNorm bn("bn", 2);
  EXPECT_THROW(bn.forward(Tensor({1, 2})), coll::Error);
  EXPECT_THROW(bn.forward(Tensor({2, 3})), coll::Error);  // wrong channel count
}

}  // namespace
}  // namespace collective::frontend
