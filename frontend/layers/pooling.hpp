// Max pooling over square windows (no padding), NCHW.
#pragma once

#include <cstdint>
#include <vector>

#include "module.hpp"

namespace collective::frontend {

class MaxPool2d : public Module {
 public:
  MaxPool2d(std::string name, int64_t kernel, int64_t stride);
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

 private:
  int64_t kernel_, stride_;
  Shape inShape_;
  std::vector<int32_t> argmax_;  // per output: offset of the winner inside its input plane
  Tensor y_, dx_;
};

}  // namespace collective::frontend
