// Batch normalisation over [B, C] (1d) or [B, C, H, W] (2d) inputs, PyTorch semantics:
// biased batch variance to normalise, unbiased variance into the running estimate,
// running = (1 - momentum) * running + momentum * batch.
#pragma once

#include <cstdint>
#include <vector>

#include "module.hpp"

namespace collective::frontend {

class BatchNorm : public Module {
 public:
  BatchNorm(std::string name, int64_t channels, double eps = 1e-5, double momentum = 0.1);

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  std::vector<Param*> parameters() override { return {&weight_, &bias_}; }
  std::vector<Buffer*> buffers() override { return {&runningMean_, &runningVar_}; }

  int64_t channels() const { return channels_; }

 protected:
  // Per-channel count, mean and biased variance.
  struct Moments {
    double count = 0;
    std::vector<double> mean, var;
  };
  // Batch moments from this rank's; the identity here, global in SyncBatchNorm.
  virtual Moments batchMoments(const Moments& local) { return local; }
  // sums = [sum dy per channel..., sum dy*xhat per channel...] of this rank, to be turned
  // into the batch's sums; nothing to do here, an all-reduce in SyncBatchNorm.
  virtual void reduceGradSums(std::vector<double>& sums) {}

 private:
  Moments localMoments(const Tensor& x) const;
  void checkInput(const Tensor& x) const;
  void normalise(const Tensor& x, const std::vector<double>& mean);
  void updateRunning(const Moments& m);

  int64_t channels_;
  double eps_, momentum_;
  Param weight_, bias_;
  Buffer runningMean_, runningVar_;
  // From the last forward, for backward.
  bool trainedForward_ = false;
  double count_ = 0;           // elements per channel in the (global) batch
  std::vector<float> mean_, invstd_;  // per channel
  Tensor x_;                          // input of the last forward, released by backward
  Tensor y_, dx_;
};

}  // namespace collective::frontend
