#include "layers/conv2d.hpp"

#include <algorithm>
#include <vector>

#include "blas.hpp"
#include "base/error.hpp"
#include "rng.hpp"

namespace collective::frontend {

namespace {

// sums[m] += sum of row m of g [rows, len], with 8 partial sums in a fixed order: one
// accumulator is a dependency chain the compiler may not split (that changes rounding).
FRONTEND_VECTOR_CLONES
void addRowSums(const float* g, int64_t rows, int64_t len, double* sums) {
  for (int64_t m = 0; m < rows; ++m) {
    float part[8] = {};
    const float* __restrict row = g + m * len;
    int64_t p = 0;
    for (; p + 8 <= len; p += 8)
      for (int l = 0; l < 8; ++l) part[l] += row[p + l];
    for (; p < len; ++p) part[0] += row[p];
    sums[m] += ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  }
}

}  // namespace

Conv2d::Conv2d(std::string name, int64_t inChannels, int64_t outChannels, int64_t kernel,
               int64_t stride, int64_t padding, uint64_t seed)
    : Module(std::move(name)),
      in_(inChannels),
      out_(outChannels),
      kernel_(kernel),
      stride_(stride),
      padding_(padding) {
  COLL_CHECK_ARG(inChannels > 0 && outChannels > 0, "Conv2d ", name_, ": channels in=", inChannels,
                 " out=", outChannels, " must be positive");
  COLL_CHECK_ARG(kernel > 0 && stride > 0 && padding >= 0, "Conv2d ", name_, ": kernel=", kernel,
                 " stride=", stride, " padding=", padding);
  weight_ = makeParam("weight", {out_, in_, kernel_, kernel_});
  bias_ = makeParam("bias", {out_});
  Rng rng(seed);
  const int64_t fanIn = in_ * kernel_ * kernel_;
  fillFanInUniform(weight_.value.span(), fanIn, rng);
  fillFanInUniform(bias_.value.span(), fanIn, rng);
}

Tensor Conv2d::forward(const Tensor& x) {
  COLL_CHECK_ARG(x.ndim() == 4 && x.dim(1) == in_, "Conv2d ", name_, ": input shape ",
                 shapeString(x.shape()), ", expected [B, ", in_, ", H, W]");
  geom_ = {1, in_, x.dim(2), x.dim(3), kernel_, stride_, padding_};
  batch_ = x.dim(0);
  const int64_t oh = geom_.outHeight(), ow = geom_.outWidth();
  COLL_CHECK_ARG(oh > 0 && ow > 0, "Conv2d ", name_, ": input ", shapeString(x.shape()),
                 " is smaller than the kernel ", kernel_);
  const int64_t plane = oh * ow, rows = geom_.colRows(), image = in_ * x.dim(2) * x.dim(3);
  x_ = x;
  ensureBuffer(col_, {rows, plane});
  ensureBuffer(y_, {batch_, out_, oh, ow});
  for (int64_t b = 0; b < batch_; ++b) {
    float* y = y_.data() + b * out_ * plane;
    // Bias first, then the GEMM accumulates onto it (beta = 1): one pass less over y.
    for (int64_t m = 0; m < out_; ++m) std::fill_n(y + m * plane, plane, bias_.value[m]);
    im2col(geom_, x.data() + b * image, col_.data());
    gemm(false, false, out_, plane, rows, 1.0f, weight_.value.data(), rows, col_.data(), plane,
         1.0f, y, plane);
  }
  return y_;
}

Tensor Conv2d::backward(const Tensor& dy) {
  COLL_CHECK_ARG(x_.defined(), "Conv2d ", name_, ": backward without a forward");
  const int64_t oh = geom_.outHeight(), ow = geom_.outWidth(), plane = oh * ow;
  COLL_CHECK_ARG(dy.shape() == Shape({batch_, out_, oh, ow}), "Conv2d ", name_, ": gradient shape ",
                 shapeString(dy.shape()), " does not match the output");
  const int64_t rows = geom_.colRows(), image = in_ * geom_.height * geom_.width;
  std::vector<double> db(static_cast<size_t>(out_), 0.0);
  if (needsInputGrad_) {
    ensureBuffer(dcol_, {rows, plane});
    ensureBuffer(dx_, x_.shape());
  }
  for (int64_t b = 0; b < batch_; ++b) {
    const float* g = dy.data() + b * out_ * plane;
    addRowSums(g, out_, plane, db.data());
    im2col(geom_, x_.data() + b * image, col_.data());
    gemm(false, true, out_, rows, plane, 1.0f, g, plane, col_.data(), plane, b ? 1.0f : 0.0f,
         weight_.grad.data(), rows);
    if (!needsInputGrad_) continue;
    gemm(true, false, rows, plane, out_, 1.0f, weight_.value.data(), rows, g, plane, 0.0f,
         dcol_.data(), plane);
    col2im(geom_, dcol_.data(), dx_.data() + b * image);
  }
  for (int64_t m = 0; m < out_; ++m) bias_.grad[m] = static_cast<float>(db[m]);
  if (batch_ == 0) weight_.grad.zero();
  x_ = Tensor();  // lets the producer of x reuse its buffer next step
  return needsInputGrad_ ? dx_ : Tensor();
}

}  // namespace collective::frontend
