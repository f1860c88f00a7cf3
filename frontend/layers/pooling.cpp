#include "layers/pooling.hpp"

#include "blas.hpp"

#include <algorithm>
#include <limits>

#include "base/error.hpp"

namespace collective::frontend {

MaxPool2d::MaxPool2d(std::string name, int64_t kernel, int64_t stride, bool fuseRelu)
    : Module(std::move(name)), kernel_(kernel), stride_(stride), relu_(fuseRelu) {
  COLL_CHECK_ARG(kernel > 0 && stride > 0, "MaxPool2d ", name_, ": kernel=", kernel,
                 " stride=", stride, " must be positive");
}

namespace {

// Whether v replaces the current maximum m: PyTorch's rule, strictly greater (the first
// maximum wins ties) or NaN (so that a NaN propagates).
inline bool takes(float v, float m) { return (v > m) | (v != v); }

void poolPlane(const float* in, int64_t w, int64_t kernel, int64_t stride, int64_t oh, int64_t ow,
               float* out, int32_t* arg) {
  for (int64_t oy = 0; oy < oh; ++oy) {
    for (int64_t ox = 0; ox < ow; ++ox) {
      int64_t best = oy * stride * w + ox * stride;
      for (int64_t i = 0; i < kernel; ++i) {
        for (int64_t j = 0; j < kernel; ++j) {
          const int64_t at = (oy * stride + i) * w + ox * stride + j;
          if (takes(in[at], in[best])) best = at;
        }
      }
      out[oy * ow + ox] = in[best];
      arg[oy * ow + ox] = static_cast<int32_t>(best);
    }
  }
}

// The 2x2 / stride 2 window of the reference model in two branch-free passes per row
// that the compiler vectorises: the maxima (ties keep the earlier element), then each
// winner's position as the first element equal to it. The generic loop mispredicts on
// about every other comparison of random activations and ran 5x slower. The first pass
// also notes whether any input is NaN (x != x); the caller then redoes the plane with
// the generic loop, whose rule propagates it. Returns that flag.
FRONTEND_VECTOR_CLONES
bool poolPlane2x2(const float* __restrict in, int64_t w, int64_t oh, int64_t ow,
                  float* __restrict out, int32_t* __restrict arg) {
  int nan = 0;
  for (int64_t oy = 0; oy < oh; ++oy) {
    const float* r0 = in + 2 * oy * w;
    const float* r1 = r0 + w;
    float* o = out + oy * ow;
    for (int64_t ox = 0; ox < ow; ++ox) {
      const float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
      nan |= (a != a) | (b != b) | (c != c) | (d != d);
      const float top = b > a ? b : a;
      const float bottom = d > c ? d : c;
      o[ox] = bottom > top ? bottom : top;
    }
    int32_t* ai = arg + oy * ow;
    const int32_t row = static_cast<int32_t>(2 * oy * w), down = static_cast<int32_t>(w);
    for (int64_t ox = 0; ox < ow; ++ox) {
      const float m = o[ox];
      const int32_t base = row + 2 * static_cast<int32_t>(ox);
      int32_t k = base + down + 1;
      k = r1[2 * ox] == m ? base + down : k;
      k = r0[2 * ox + 1] == m ? base + 1 : k;
      k = r0[2 * ox] == m ? base : k;
      ai[ox] = k;
    }
  }
  return nan != 0;
}

// std::max(v, 0) keeps a NaN NaN, as torch.relu does.
FRONTEND_VECTOR_CLONES
void reluInPlace(float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(y[i], 0.0f);
}

// dx[winner] += dy per output (only where the fused ReLU's output y > 0, when y is given).
FRONTEND_VECTOR_CLONES
void scatterGrad(const float* dy, const float* y, const int32_t* argmax, int64_t planes,
                 int64_t in, int64_t out, float* dx) {
  for (int64_t pl = 0; pl < planes; ++pl) {
    float* d = dx + pl * in;
    const float* g = dy + pl * out;
    const int32_t* arg = argmax + pl * out;
    if (y) {
      const float* yp = y + pl * out;
      for (int64_t o = 0; o < out; ++o) d[arg[o]] += yp[o] > 0.0f ? g[o] : 0.0f;
    } else {
      for (int64_t o = 0; o < out; ++o) d[arg[o]] += g[o];
    }
  }
}

}  // namespace

Tensor MaxPool2d::forward(const Tensor& x) {
  COLL_CHECK_ARG(x.ndim() == 4, "MaxPool2d ", name_, ": input shape ", shapeString(x.shape()),
                 ", expected NCHW");
  const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
  COLL_CHECK_ARG(h >= kernel_ && w >= kernel_, "MaxPool2d ", name_, ": input ",
                 shapeString(x.shape()), " smaller than the window ", kernel_);
  COLL_CHECK_ARG(h * w <= std::numeric_limits<int32_t>::max(), "MaxPool2d ", name_, ": plane of ",
                 h * w, " elements is too large");
  const int64_t oh = (h - kernel_) / stride_ + 1, ow = (w - kernel_) / stride_ + 1;
  inShape_ = x.shape();
  ensureBuffer(y_, {x.dim(0), x.dim(1), oh, ow});
  argmax_.resize(static_cast<size_t>(y_.numel()));
  const bool fast = kernel_ == 2 && stride_ == 2;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* in = x.data() + pl * h * w;
    float* out = y_.data() + pl * oh * ow;
    int32_t* arg = argmax_.data() + pl * oh * ow;
    if (!fast || poolPlane2x2(in, w, oh, ow, out, arg))
      poolPlane(in, w, kernel_, stride_, oh, ow, out, arg);
  }
  if (relu_) reluInPlace(y_.data(), y_.numel());
  return y_;
}

Tensor MaxPool2d::backward(const Tensor& dy) {
  COLL_CHECK_ARG(dy.shape() == y_.shape(), "MaxPool2d ", name_, ": gradient shape ",
                 shapeString(dy.shape()), ", output shape ", shapeString(y_.shape()));
  ensureBuffer(dx_, inShape_);
  dx_.zero();
  const int64_t planes = inShape_[0] * inShape_[1], in = inShape_[2] * inShape_[3];
  const int64_t out = dy.dim(2) * dy.dim(3);
  scatterGrad(dy.data(), relu_ ? y_.data() : nullptr, argmax_.data(), planes, in, out,
              dx_.data());
  return dx_;
}

}  // namespace collective::frontend
