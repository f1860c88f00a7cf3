#include "layers/batchnorm.hpp"

#include "blas.hpp"

#include <cmath>

#include "base/error.hpp"

namespace collective::frontend {

namespace {

// Elements per (sample, channel) row: H*W for 2d, 1 for 1d.
int64_t rowLength(const Tensor& x) { return x.ndim() == 4 ? x.dim(2) * x.dim(3) : 1; }

// Row reductions with 8 independent partial sums: a single float accumulator is a serial
// dependency chain the compiler may not reorder (that would change the rounding), eight
// lanes vectorise. The fixed lane order keeps results deterministic.
constexpr int kLanes = 8;

[[gnu::always_inline]] inline float laneTotal(const float (&acc)[kLanes]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

[[gnu::always_inline]] inline float rowSum(const float* __restrict v, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += v[i + l];
  for (; i < n; ++i) acc[0] += v[i];
  return laneTotal(acc);
}

[[gnu::always_inline]] inline float rowSquaredDeviation(const float* __restrict v, float mu, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += (v[i + l] - mu) * (v[i + l] - mu);
  for (; i < n; ++i) acc[0] += (v[i] - mu) * (v[i] - mu);
  return laneTotal(acc);
}

// sum(g) and sum(g * xhat) with xhat = (x - mu) * is, in one pass.
[[gnu::always_inline]] inline void rowSumAndDot(const float* __restrict g, const float* __restrict x, float mu, float is,
                  int64_t n, float& sum, float& dot) {
  float s[kLanes] = {}, d[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      s[l] += g[i + l];
      d[l] += g[i + l] * ((x[i + l] - mu) * is);
    }
  for (; i < n; ++i) {
    s[0] += g[i];
    d[0] += g[i] * ((x[i] - mu) * is);
  }
  sum = laneTotal(s);
  dot = laneTotal(d);
}


// Per channel: sums[c] += sum(dy), sums[C + c] += sum(dy * xhat) over the batch.
FRONTEND_VECTOR_CLONES
void gradSums(const float* dy, const float* x, const float* mean, const float* invstd,
              int64_t batch, int64_t C, int64_t len, double* sums) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t at = (b * C + c) * len;
      float sd, sdx;
      rowSumAndDot(dy + at, x + at, mean[c], invstd[c], len, sd, sdx);
      sums[c] += sd;
      sums[C + c] += sdx;
    }
  }
}

// dx = scale * (dy - mean(dy) - xhat * mean(dy * xhat)), per channel.
FRONTEND_VECTOR_CLONES
void inputGrad(const float* dy, const float* x, const float* mean, const float* invstd,
               const float* scale, const float* meanDy, const float* meanDyXhat, int64_t batch,
               int64_t C, int64_t len, float* dx) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t at = (b * C + c) * len;
      const float mu = mean[c], is = invstd[c], sc = scale[c], md = meanDy[c],
                  mdx = meanDyXhat[c];
      const float* __restrict g = dy + at;
      const float* __restrict xi = x + at;
      float* __restrict out = dx + at;
      for (int64_t i = 0; i < len; ++i) out[i] = sc * (g[i] - md - ((xi[i] - mu) * is) * mdx);
    }
  }
}

}  // namespace

BatchNorm::BatchNorm(std::string name, int64_t channels, double eps, double momentum)
    : Module(std::move(name)), channels_(channels), eps_(eps), momentum_(momentum) {
  COLL_CHECK_ARG(channels > 0, "BatchNorm ", name_, ": channels=", channels, " must be positive");
  COLL_CHECK_ARG(eps > 0 && momentum >= 0 && momentum <= 1, "BatchNorm ", name_, ": eps=", eps,
                 " momentum=", momentum);
  weight_ = makeParam("weight", {channels});
  bias_ = makeParam("bias", {channels});
  weight_.value.fill(1.0f);
  runningMean_ = Buffer{name_ + ".running_mean", Tensor({channels})};
  runningVar_ = Buffer{name_ + ".running_var", Tensor({channels})};
  runningVar_.value.fill(1.0f);
}

void BatchNorm::checkInput(const Tensor& x) const {
  COLL_CHECK_ARG((x.ndim() == 2 || x.ndim() == 4) && x.dim(1) == channels_, "BatchNorm ", name_,
                 ": input shape ", shapeString(x.shape()), ", expected [B, ", channels_,
                 "] or [B, ", channels_, ", H, W]");
}

// Two passes (mean, then squared deviations): one-pass sum/sum-of-squares loses digits
// when |mean| >> std. Rows are summed in float, rows combined in double.
FRONTEND_VECTOR_CLONES
BatchNorm::Moments BatchNorm::localMoments(const Tensor& x) const {
  const int64_t batch = x.dim(0), len = rowLength(x);
  Moments m;
  m.count = static_cast<double>(batch * len);
  m.mean.assign(channels_, 0.0);
  m.var.assign(channels_, 0.0);
  if (batch == 0) return m;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < channels_; ++c) {
      m.mean[c] += rowSum(x.data() + (b * channels_ + c) * len, len);
    }
  }
  for (double& v : m.mean) v /= m.count;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < channels_; ++c) {
      const float mu = static_cast<float>(m.mean[c]);
      m.var[c] += rowSquaredDeviation(x.data() + (b * channels_ + c) * len, mu, len);
    }
  }
  for (double& v : m.var) v /= m.count;
  return m;
}

// y = xhat * gamma + beta with xhat = (x - mean) * invstd. xhat is not stored: backward
// recomputes it from x with the same expression, one subtraction and one multiply per
// element instead of a write and a read of a tensor the size of x.
FRONTEND_VECTOR_CLONES
void BatchNorm::normalise(const Tensor& x, const std::vector<double>& mean) {
  const int64_t batch = x.dim(0), len = rowLength(x);
  x_ = x;
  mean_.resize(channels_);
  for (int64_t c = 0; c < channels_; ++c) mean_[c] = static_cast<float>(mean[c]);
  ensureBuffer(y_, x.shape());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < channels_; ++c) {
      const int64_t at = (b * channels_ + c) * len;
      const float mu = mean_[c], is = invstd_[c];
      const float g = weight_.value[c], beta = bias_.value[c];
      const float* __restrict in = x.data() + at;
      float* __restrict out = y_.data() + at;
      for (int64_t i = 0; i < len; ++i) out[i] = ((in[i] - mu) * is) * g + beta;
    }
  }
}

void BatchNorm::updateRunning(const Moments& m) {
  const double unbias = m.count / (m.count - 1.0);
  for (int64_t c = 0; c < channels_; ++c) {
    float& rm = runningMean_.value[c];
    float& rv = runningVar_.value[c];
    rm = static_cast<float>((1.0 - momentum_) * rm + momentum_ * m.mean[c]);
    rv = static_cast<float>((1.0 - momentum_) * rv + momentum_ * m.var[c] * unbias);
  }
}

Tensor BatchNorm::forward(const Tensor& x) {
  checkInput(x);
  invstd_.resize(channels_);
  trainedForward_ = training_;
  if (!training_) {
    std::vector<double> mean(runningMean_.value.data(), runningMean_.value.data() + channels_);
    for (int64_t c = 0; c < channels_; ++c)
      invstd_[c] = static_cast<float>(1.0 / std::sqrt(runningVar_.value[c] + eps_));
    normalise(x, mean);
    return y_;
  }
  const Moments m = batchMoments(localMoments(x));
  COLL_CHECK_ARG(m.count > 1, "BatchNorm ", name_,
                 ": training needs more than one value per "
                 "channel, the batch has ",
                 m.count);
  count_ = m.count;
  for (int64_t c = 0; c < channels_; ++c)
    invstd_[c] = static_cast<float>(1.0 / std::sqrt(m.var[c] + eps_));
  normalise(x, m.mean);
  updateRunning(m);
  return y_;
}

Tensor BatchNorm::backward(const Tensor& dy) {
  COLL_CHECK_ARG(x_.defined(), "BatchNorm ", name_, ": backward without a forward");
  COLL_CHECK_ARG(dy.shape() == x_.shape(), "BatchNorm ", name_, ": gradient shape ",
                 shapeString(dy.shape()), ", input shape ", shapeString(x_.shape()));
  const int64_t batch = dy.dim(0), len = rowLength(dy), C = channels_;
  std::vector<double> sums(2 * C, 0.0);
  gradSums(dy.data(), x_.data(), mean_.data(), invstd_.data(), batch, C, len, sums.data());
  // gamma and beta act per sample, so their gradients are this rank's sums; averaging
  // across ranks happens with the other parameter gradients.
  for (int64_t c = 0; c < C; ++c) {
    bias_.grad[c] = static_cast<float>(sums[c]);
    weight_.grad[c] = static_cast<float>(sums[C + c]);
  }
  if (!needsInputGrad_) {
    x_ = Tensor();
    return {};
  }
  ensureBuffer(dx_, dy.shape());
  if (trainedForward_) reduceGradSums(sums);
  std::vector<float> scale(C), meanDy(C, 0.0f), meanDyXhat(C, 0.0f);
  for (int64_t c = 0; c < C; ++c) {
    scale[c] = weight_.value[c] * invstd_[c];
    // In eval mode the statistics are constants and only the affine part remains.
    if (trainedForward_) {
      meanDy[c] = static_cast<float>(sums[c] / count_);
      meanDyXhat[c] = static_cast<float>(sums[C + c] / count_);
    }
  }
  inputGrad(dy.data(), x_.data(), mean_.data(), invstd_.data(), scale.data(), meanDy.data(),
            meanDyXhat.data(), batch, C, len, dx_.data());
  x_ = Tensor();  // lets the producer of x reuse its buffer next step
  return dx_;
}

}  // namespace collective::frontend
