// Fully connected layer, y = x W^T + b with W stored [out, in] as in PyTorch.
#pragma once

#include <cstdint>

#include "module.hpp"

namespace collective::frontend {

class Linear : public Module {
 public:
  Linear(std::string name, int64_t inFeatures, int64_t outFeatures, uint64_t seed);

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  std::vector<Param*> parameters() override { return {&weight_, &bias_}; }

 private:
  int64_t in_, out_;
  Param weight_;  // [out, in]
  Param bias_;    // [out]
  Tensor x_;      // input of the last forward, released by backward
  Tensor y_, dx_;
};

}  // namespace collective::frontend
