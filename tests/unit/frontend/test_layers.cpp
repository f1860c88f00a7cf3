// Forward values against naive references and backward against numerical gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.hpp"
#include "gradcheck.hpp"
#include "layers/activation.hpp"
#include "layers/batchnorm.hpp"
#include "layers/conv2d.hpp"
#include "layers/linear.hpp"
#include "layers/pooling.hpp"

namespace collective::frontend {
namespace {

using testing::checkLayerGradients;
using testing::GradTolerance;
using testing::randomTensor;

struct ConvCase {
  int64_t batch, in, out, h, w, kernel, stride, padding;
};

// Direct 7-loop convolution.
Tensor naiveConv(const Tensor& x, const Tensor& wt, const Tensor& b, const ConvCase& c) {
  const int64_t oh = (c.h + 2 * c.padding - c.kernel) / c.stride + 1;
  const int64_t ow = (c.w + 2 * c.padding - c.kernel) / c.stride + 1;
  Tensor y({c.batch, c.out, oh, ow});
  for (int64_t n = 0; n < c.batch; ++n)
    for (int64_t o = 0; o < c.out; ++o)
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double s = b[o];
          for (int64_t ci = 0; ci < c.in; ++ci)
            for (int64_t i = 0; i < c.kernel; ++i)
              for (int64_t j = 0; j < c.kernel; ++j) {
                const int64_t iy = yy * c.stride - c.padding + i,
                              ix = xx * c.stride - c.padding + j;
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                s += static_cast<double>(x[((n * c.in + ci) * c.h + iy) * c.w + ix]) *
                     wt[((o * c.in + ci) * c.kernel + i) * c.kernel + j];
              }
          y[((n * c.out + o) * oh + yy) * ow + xx] = static_cast<float>(s);
        }
  return y;
}

class ConvTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvTest, ForwardMatchesDirectConvolution) {
  const ConvCase c = GetParam();
  Conv2d conv("conv", c.in, c.out, c.kernel, c.stride, c.padding, 7);
  const Tensor x = randomTensor({c.batch, c.in, c.h, c.w}, 3);
  const Tensor y = conv.forward(x);
  auto params = conv.parameters();
  const Tensor ref = naiveConv(x, params[0]->value, params[1]->value, c);
  ASSERT_EQ(y.shape(), ref.shape());
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-5) << "at " << i;
}

TEST_P(ConvTest, BackwardMatchesNumericalGradient) {
  const ConvCase c = GetParam();
  Conv2d conv("conv", c.in, c.out, c.kernel, c.stride, c.padding, 11);
  checkLayerGradients(conv, randomTensor({c.batch, c.in, c.h, c.w}, 5));
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvTest,
                         ::testing::Values(ConvCase{2, 1, 3, 5, 5, 3, 1, 1},
                                           ConvCase{2, 2, 3, 6, 5, 3, 2, 0},
                                           ConvCase{1, 3, 2, 7, 4, 2, 2, 1},
                                           ConvCase{3, 2, 4, 4, 4, 1, 1, 0}));

TEST(Conv2d, SkipsInputGradientWhenNotNeeded) {
  Conv2d conv("conv", 1, 2, 3, 1, 1, 1);
  conv.setNeedsInputGrad(false);
  const Tensor x = randomTensor({2, 1, 4, 4}, 1);
  const Tensor y = conv.forward(x);
  EXPECT_FALSE(conv.backward(randomTensor(y.shape(), 2)).defined());
  EXPECT_NE(conv.parameters()[0]->grad[0], 0.0f);
}

TEST(Conv2d, RejectsWrongChannelCount) {
  Conv2d conv("conv", 2, 2, 3, 1, 1, 1);
  EXPECT_THROW(conv.forward(Tensor({1, 3, 5, 5})), coll::Error);
}

TEST(Linear, ForwardMatchesDefinition) {
  Linear fc("fc", 4, 3, 5);
  const Tensor x = randomTensor({2, 4}, 1);
  const Tensor y = fc.forward(x);
  auto p = fc.parameters();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t o = 0; o < 3; ++o) {
      double s = p[1]->value[o];
      for (int64_t i = 0; i < 4; ++i) s += x[b * 4 + i] * p[0]->value[o * 4 + i];
      EXPECT_NEAR(y[b * 3 + o], s, 1e-6);
    }
}

TEST(Linear, BackwardMatchesNumericalGradient) {
  Linear fc("fc", 7, 5, 3);
  checkLayerGradients(fc, randomTensor({4, 7}, 8));
}

TEST(Linear, InitIsDeterministicAndBoundedByFanIn) {
  Linear a("fc", 16, 8, 42), b("fc", 16, 8, 42), c("fc", 16, 8, 43);
  const auto& wa = a.parameters()[0]->value;
  EXPECT_EQ(wa.toVector(), b.parameters()[0]->value.toVector());
  EXPECT_NE(wa.toVector(), c.parameters()[0]->value.toVector());
  for (float v : wa.span()) EXPECT_LE(std::abs(v), 0.25f);  // 1/sqrt(16)
}

TEST(ReLU, ForwardAndBackward) {
  ReLU relu("relu");
  // Keep inputs away from the kink so central differences do not straddle it.
  Tensor x = randomTensor({3, 10}, 4, 0.05f, 1.0f);
  for (int64_t i = 0; i < x.numel(); i += 2) x[i] = -x[i];
  const Tensor y = relu.forward(x);
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y[i], std::max(x[i], 0.0f));
  checkLayerGradients(relu, x);
}

TEST(MaxPool2d, ForwardPicksWindowMaximum) {
  MaxPool2d pool("pool", 2, 2);
  Tensor x = Tensor::fromVector({1, 1, 2, 4}, {1, 5, 2, 0, 3, 4, 7, 6});
  const Tensor y = pool.forward(x);
  ASSERT_EQ(y.shape(), Shape({1, 1, 1, 2}));
  EXPECT_EQ(y[0], 5.0f);
  EXPECT_EQ(y[1], 7.0f);
  const Tensor dx = pool.backward(Tensor::fromVector({1, 1, 1, 2}, {10, 20}));
  EXPECT_EQ(dx.toVector(), std::vector<float>({0, 10, 0, 0, 0, 0, 20, 0}));
}

TEST(MaxPool2d, TiesGoToTheFirstElementAndNaNPropagates) {
  MaxPool2d pool("pool", 2, 2);
  const float nan = std::nanf("");
  // Plane 0 (the branch-free 2x2 path): a tie between positions 0 and 1.
  // Plane 1 (a NaN sends it down the generic path): the NaN must win.
  Tensor x = Tensor::fromVector({1, 2, 2, 2}, {2, 2, 1, 0, 0, 1, nan, 5});
  const Tensor y = pool.forward(x);
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_TRUE(std::isnan(y[1]));
  const Tensor dx = pool.backward(Tensor::fromVector({1, 2, 1, 1}, {1, 1}));
  EXPECT_EQ(dx.toVector(), std::vector<float>({1, 0, 0, 0, 0, 0, 1, 0}));
}

TEST(MaxPool2d, GenericWindowMatchesDefinition) {
  MaxPool2d pool("pool", 3, 2);
  const Tensor x = randomTensor({2, 2, 7, 5}, 12);
  const Tensor y = pool.forward(x);
  ASSERT_EQ(y.shape(), Shape({2, 2, 3, 2}));
  for (int64_t pl = 0; pl < 4; ++pl)
    for (int64_t oy = 0; oy < 3; ++oy)
      for (int64_t ox = 0; ox < 2; ++ox) {
        float m = -1e30f;
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 3; ++j)
            m = std::max(m, x[pl * 35 + (2 * oy + i) * 5 + 2 * ox + j]);
        EXPECT_EQ(y[pl * 6 + oy * 2 + ox], m);
      }
}

TEST(MaxPool2d, BackwardMatchesNumericalGradient) {
  MaxPool2d pool("pool", 2, 2);
  // Distinct values 0.05 apart: no window has a near-tie that a step of 0.01 could flip.
  Tensor x({2, 3, 4, 6});
  Rng rng(5);
  auto order = permutation(x.numel(), rng);
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = 0.05f * static_cast<float>(order[i]);
  checkLayerGradients(pool, x);
}

// The fused ReLU gives exactly ReLU followed by MaxPool2d: same values, same gradients
// (windows with a negative or zero maximum get none), NaN still propagates.
TEST(MaxPool2d, FusedReluEqualsReluThenPool) {
  for (int64_t kernel : {2, 3}) {
    Tensor x = randomTensor({3, 4, 8, 8}, 11 + kernel, -1.5f, 0.5f);
    x[5] = std::nanf("");
    MaxPool2d fused("fused", kernel, 2, true), pool("pool", kernel, 2);
    ReLU relu("relu");
    const Tensor y = fused.forward(x).clone();
    const Tensor ref = pool.forward(relu.forward(x)).clone();
    ASSERT_EQ(y.shape(), ref.shape());
    int negativeWindows = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      if (std::isnan(ref[i])) {
        EXPECT_TRUE(std::isnan(y[i])) << "at " << i;
        continue;
      }
      EXPECT_EQ(y[i], ref[i]) << "at " << i;
      negativeWindows += ref[i] == 0.0f;
    }
    EXPECT_GT(negativeWindows, 0);  // the case where the two orders pick different winners
    const Tensor dy = randomTensor(y.shape(), 12);
    const Tensor dx = fused.backward(dy).clone();
    const Tensor dref = relu.backward(pool.backward(dy));
    for (int64_t i = 0; i < dx.numel(); ++i) ASSERT_EQ(dx[i], dref[i]) << "at " << i;
  }
}

TEST(Flatten, IsAViewAndRestoresShape) {
  Flatten f("flatten");
  const Tensor x = randomTensor({2, 3, 2, 2}, 1);
  const Tensor y = f.forward(x);
  EXPECT_EQ(y.shape(), Shape({2, 12}));
  EXPECT_EQ(y.data(), x.data());
  EXPECT_EQ(f.backward(y).shape(), x.shape());
}

}  // namespace
}  // namespace collective::frontend
