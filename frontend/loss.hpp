// Softmax + cross-entropy over logits [B, K] with integer labels, mean over the batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensor.hpp"

namespace collective::frontend {

class SoftmaxCrossEntropy {
 public:
  // Mean loss; keeps the probabilities for backward().
  float forward(const Tensor& logits, std::span<const int32_t> labels);
  // d(mean loss)/d(logits) = (softmax - onehot) / B.
  Tensor backward();
  // Samples of the last forward whose arg-max logit equals the label.
  int64_t correct() const { return correct_; }

 private:
  Tensor prob_, grad_;
  std::vector<int32_t> labels_;
  int64_t correct_ = 0;
};

// Arg-max predictions equal to the labels (for evaluation without a loss).
int64_t countCorrect(const Tensor& logits, std::span<const int32_t> labels);

}  // namespace collective::frontend
