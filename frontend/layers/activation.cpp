#include "layers/activation.hpp"

#include "blas.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace collective::frontend {

Tensor ReLU::forward(const Tensor& x) {
  ensureBuffer(y_, x.shape());
  const float* __restrict in = x.data();
  float* __restrict out = y_.data();
  // std::max(v, 0) keeps a NaN input NaN, as torch.relu does.
  for (int64_t i = 0, n = x.numel(); i < n; ++i) out[i] = std::max(in[i], 0.0f);
  return y_;
}

Tensor ReLU::backward(const Tensor& dy) {
  COLL_CHECK_ARG(dy.shape() == y_.shape(), "ReLU ", name_, ": gradient shape ",
                 shapeString(dy.shape()), ", output shape ", shapeString(y_.shape()));
  ensureBuffer(dx_, dy.shape());
  const float* __restrict y = y_.data();
  const float* __restrict g = dy.data();
  float* __restrict out = dx_.data();
  // Both operands loaded unconditionally: a select vectorises, a guarded load does not
  // (and mispredicts on every other element).
  for (int64_t i = 0, n = dy.numel(); i < n; ++i) {
    const float gi = g[i];
    out[i] = y[i] > 0.0f ? gi : 0.0f;
  }
  return dx_;
}

Tensor Flatten::forward(const Tensor& x) {
  COLL_CHECK_ARG(x.ndim() >= 1, "Flatten ", name_, ": input must have a batch dimension");
  inShape_ = x.shape();
  int64_t features = 1;
  for (size_t i = 1; i < x.ndim(); ++i) features *= x.dim(i);
  return x.reshape({x.dim(0), features});
}

Tensor Flatten::backward(const Tensor& dy) {
  COLL_CHECK_ARG(dy.numel() == shapeNumel(inShape_), "Flatten ", name_, ": gradient has ",
                 dy.numel(), " elements, input had ", shapeNumel(inShape_));
  return dy.reshape(inShape_);
}

}  // namespace collective::frontend
