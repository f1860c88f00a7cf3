#include "loss.hpp"

#include <cmath>

#include "base/error.hpp"

namespace collective::frontend {

namespace {

void checkLabels(const Tensor& logits, std::span<const int32_t> labels) {
  COLL_CHECK_ARG(logits.ndim() == 2, "cross-entropy: logits shape ", shapeString(logits.shape()),
                 ", expected [B, K]");
  COLL_CHECK_ARG(static_cast<int64_t>(labels.size()) == logits.dim(0),
                 "cross-entropy: ", labels.size(), " labels for a batch of ", logits.dim(0));
  for (int32_t l : labels)
    COLL_CHECK_ARG(l >= 0 && l < logits.dim(1), "cross-entropy: label ", l, " outside [0, ",
                   logits.dim(1), ")");
}

int64_t argmax(const float* row, int64_t k) {
  int64_t best = 0;
  for (int64_t j = 1; j < k; ++j)
    if (row[j] > row[best]) best = j;
  return best;
}

}  // namespace

float SoftmaxCrossEntropy::forward(const Tensor& logits, std::span<const int32_t> labels) {
  checkLabels(logits, labels);
  const int64_t batch = logits.dim(0), k = logits.dim(1);
  ensureBuffer(prob_, logits.shape());
  labels_.assign(labels.begin(), labels.end());
  correct_ = 0;
  double total = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    const float* z = logits.data() + b * k;
    float* p = prob_.data() + b * k;
    const int64_t top = argmax(z, k);
    correct_ += top == labels[b];
    // Shift by the max so that exp never overflows; log-sum-exp for the loss.
    const float zmax = z[top];
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      p[j] = std::exp(z[j] - zmax);
      sum += p[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < k; ++j) p[j] *= inv;
    total += std::log(sum) - (z[labels[b]] - zmax);
  }
  return batch ? static_cast<float>(total / batch) : 0.0f;
}

Tensor SoftmaxCrossEntropy::backward() {
  COLL_CHECK_ARG(prob_.defined(), "cross-entropy: backward without a forward");
  const int64_t batch = prob_.dim(0), k = prob_.dim(1);
  ensureBuffer(grad_, prob_.shape());
  const float scale = batch ? 1.0f / static_cast<float>(batch) : 0.0f;
  for (int64_t b = 0; b < batch; ++b) {
    const float* p = prob_.data() + b * k;
    float* g = grad_.data() + b * k;
    for (int64_t j = 0; j < k; ++j) g[j] = p[j] * scale;
    g[labels_[b]] -= scale;
  }
  return grad_;
}

int64_t countCorrect(const Tensor& logits, std::span<const int32_t> labels) {
  checkLabels(logits, labels);
  int64_t n = 0;
  for (int64_t b = 0; b < logits.dim(0); ++b)
    n += argmax(logits.data() + b * logits.dim(1), logits.dim(1)) == labels[b];
  return n;
}

}  // namespace collective::frontend
