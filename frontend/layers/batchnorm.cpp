#include "layers/batchnorm.hpp"

#include <cmath>

#include "core/error.hpp"

namespace collective::frontend {

namespace {

// Elements per (sample, channel) row: H*W for 2d, 1 for 1d.
int64_t rowLength(const Tensor& x) { return x.ndim() == 4 ? x.dim(2) * x.dim(3) : 1; }

// Row reductions with 8 independent partial sums: a single float accumulator is a serial
// dependency chain the compiler may not reorder (that would change the rounding), eight
// lanes vectorise. The fixed lane order keeps results deterministic.
constexpr int kLanes = 8;

float laneTotal(const float (&acc)[kLanes]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

float rowSum(const float* __restrict v, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += v[i + l];
  for (; i < n; ++i) acc[0] += v[i];
  return laneTotal(acc);
}

float rowSquaredDeviation(const float* __restrict v, float mu, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += (v[i + l] - mu) * (v[i + l] - mu);
  for (; i < n; ++i) acc[0] += (v[i] - mu) * (v[i] - mu);
  return laneTotal(acc);
}

// sum(g) and sum(g * h) in one pass.
void rowSumAndDot(const float* __restrict g, const float* __restrict h, int64_t n, float& sum,
                  float& dot) {
  float s[kLanes] = {}, d[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      s[l] += g[i + l];
      d[l] += g[i + l] * h[i + l];
    }
  for (; i < n; ++i) {
    s[0] += g[i];
    d[0] += g[i] * h[i];
  }
  sum = laneTotal(s);
  dot = laneTotal(d);
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

void BatchNorm::normalise(const Tensor& x, const std::vector<double>& mean) {
  const int64_t batch = x.dim(0), len = rowLength(x);
  ensureBuffer(xhat_, x.shape());
  ensureBuffer(y_, x.shape());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < channels_; ++c) {
      const int64_t at = (b * channels_ + c) * len;
      const float mu = static_cast<float>(mean[c]), is = invstd_[c];
      const float g = weight_.value[c], beta = bias_.value[c];
      const float* __restrict in = x.data() + at;
      float* __restrict xh = xhat_.data() + at;
      float* __restrict out = y_.data() + at;
      for (int64_t i = 0; i < len; ++i) {
        xh[i] = (in[i] - mu) * is;
        out[i] = xh[i] * g + beta;
      }
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
  COLL_CHECK_ARG(dy.shape() == xhat_.shape(), "BatchNorm ", name_, ": gradient shape ",
                 shapeString(dy.shape()), ", input shape ", shapeString(xhat_.shape()));
  const int64_t batch = dy.dim(0), len = rowLength(dy), C = channels_;
  std::vector<double> sums(2 * C, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t at = (b * C + c) * len;
      float sd, sdx;
      rowSumAndDot(dy.data() + at, xhat_.data() + at, len, sd, sdx);
      sums[c] += sd;
      sums[C + c] += sdx;
    }
  }
  // gamma and beta act per sample, so their gradients are this rank's sums; averaging
  // across ranks happens with the other parameter gradients.
  for (int64_t c = 0; c < C; ++c) {
    bias_.grad[c] = static_cast<float>(sums[c]);
    weight_.grad[c] = static_cast<float>(sums[C + c]);
  }
  if (!needsInputGrad_) return {};
  ensureBuffer(dx_, dy.shape());
  if (trainedForward_) reduceGradSums(sums);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t at = (b * C + c) * len;
      const float scale = weight_.value[c] * invstd_[c];
      // In eval mode the statistics are constants and only the affine part remains.
      const float meanDy = trainedForward_ ? static_cast<float>(sums[c] / count_) : 0.0f;
      const float meanDyXhat = trainedForward_ ? static_cast<float>(sums[C + c] / count_) : 0.0f;
      const float* __restrict g = dy.data() + at;
      const float* __restrict xh = xhat_.data() + at;
      float* __restrict out = dx_.data() + at;
      for (int64_t i = 0; i < len; ++i) out[i] = scale * (g[i] - meanDy - xh[i] * meanDyXhat);
    }
  }
  return dx_;
}

}  // namespace collective::frontend
