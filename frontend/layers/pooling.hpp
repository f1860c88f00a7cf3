// Max pooling over square windows (no padding), NCHW, optionally followed by a ReLU in
// the same pass: relu(maxpool(x)) = maxpool(relu(x)) (max commutes with a monotone
// function, ties resolve to the same element, and a window whose maximum is <= 0 has a
// zero gradient either way), so the fused layer computes exactly ReLU then MaxPool2d on
// a quarter of the elements, without the separate layer's two passes over the input.
#pragma once

#include <cstdint>
#include <vector>

#include "module.hpp"

namespace collective::frontend {

class MaxPool2d : public Module {
 public:
  MaxPool2d(std::string name, int64_t kernel, int64_t stride, bool fuseRelu = false);
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

 private:
  int64_t kernel_, stride_;
  bool relu_;
  Shape inShape_;
  std::vector<int32_t> argmax_;  // per output: offset of the winner inside its input plane
  Tensor y_, dx_;
};

}  // namespace collective::frontend
