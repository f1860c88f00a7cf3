// Stochastic gradient descent with momentum and weight decay, PyTorch's update rule:
//   g = grad + weight_decay * p;  buf = g (first step) or momentum * buf + g;  p -= lr * buf
#pragma once

#include <vector>

#include "module.hpp"

namespace collective::frontend {

struct SgdOptions {
  float lr = 0.05f;
  float momentum = 0.9f;
  float weightDecay = 0.0f;
};

class Sgd {
 public:
  Sgd(std::vector<Param*> params, SgdOptions options);

  void step();

  // Momentum correction (Deep Gradient Compression, Lin et al. 2018) for sparsified
  // all-reduce: each rank folds momentum and weight decay into its gradient *before* the
  // reduction, grad_i <- buf_i = momentum * buf_i + grad_i + weight_decay * p_i, so that
  // top-k selects from (and error feedback keeps) the velocity rather than the raw
  // gradient; stepFolded() then applies the reduced velocity, p -= lr * grad. Without
  // compression this is the same update as step(): averaging is linear.
  void foldMomentum(size_t i);
  void stepFolded();
  void setLr(float lr) { options_.lr = lr; }
  const SgdOptions& options() const { return options_; }
  const std::vector<Param*>& params() const { return params_; }

  // Momentum buffers, named "<param>.momentum"; broadcast and checkpointed with the model.
  // steps() counts completed steps (0: buffers not yet initialised from a gradient).
  std::vector<Buffer*> state();
  int64_t steps() const { return steps_; }
  void setSteps(int64_t steps) { steps_ = steps; }

 private:
  std::vector<Param*> params_;
  SgdOptions options_;
  std::vector<Buffer> momentum_;
  int64_t steps_ = 0;
};

}  // namespace collective::frontend
