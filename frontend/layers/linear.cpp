#include "layers/linear.hpp"

#include "blas.hpp"
#include "base/error.hpp"
#include "rng.hpp"

namespace collective::frontend {

Linear::Linear(std::string name, int64_t inFeatures, int64_t outFeatures, uint64_t seed)
    : Module(std::move(name)), in_(inFeatures), out_(outFeatures) {
  COLL_CHECK_ARG(inFeatures > 0 && outFeatures > 0, "Linear ", name_, ": in=", inFeatures,
                 " out=", outFeatures, " must be positive");
  weight_ = makeParam("weight", {out_, in_});
  bias_ = makeParam("bias", {out_});
  Rng rng(seed);
  fillFanInUniform(weight_.value.span(), in_, rng);
  fillFanInUniform(bias_.value.span(), in_, rng);
}

Tensor Linear::forward(const Tensor& x) {
  COLL_CHECK_ARG(x.ndim() == 2 && x.dim(1) == in_, "Linear ", name_, ": input shape ",
                 shapeString(x.shape()), ", expected [B, ", in_, "]");
  const int64_t batch = x.dim(0);
  x_ = x;
  ensureBuffer(y_, {batch, out_});
  float* y = y_.data();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < out_; ++o) y[b * out_ + o] = bias_.value[o];
  gemm(false, true, batch, out_, in_, 1.0f, x.data(), in_, weight_.value.data(), in_, 1.0f, y,
       out_);
  return y_;
}

Tensor Linear::backward(const Tensor& dy) {
  COLL_CHECK_ARG(x_.defined(), "Linear ", name_, ": backward without a forward");
  const int64_t batch = x_.dim(0);
  COLL_CHECK_ARG(dy.shape() == Shape({batch, out_}), "Linear ", name_, ": gradient shape ",
                 shapeString(dy.shape()), ", expected ", shapeString({batch, out_}));
  gemm(true, false, out_, in_, batch, 1.0f, dy.data(), out_, x_.data(), in_, 0.0f,
       weight_.grad.data(), in_);
  float* db = bias_.grad.data();
  for (int64_t o = 0; o < out_; ++o) {
    double sum = 0.0;
    for (int64_t b = 0; b < batch; ++b) sum += dy[b * out_ + o];
    db[o] = static_cast<float>(sum);
  }
  Tensor dx;
  if (needsInputGrad_) {
    ensureBuffer(dx_, {batch, in_});
    gemm(false, false, batch, in_, out_, 1.0f, dy.data(), out_, weight_.value.data(), in_, 0.0f,
         dx_.data(), in_);
    dx = dx_;
  }
  x_ = Tensor();  // lets the producer of x reuse its buffer next step
  return dx;
}

}  // namespace collective::frontend
