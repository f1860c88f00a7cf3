// Layers with an explicit forward and backward (no autograd graph).
//
// A layer keeps what its backward needs from the last forward, so forward/backward must
// alternate. backward() sets the gradients of the layer's own parameters (overwriting,
// not accumulating: one backward per step) and returns the gradient of its input.
#pragma once

#include <string>
#include <vector>

#include "tensor.hpp"

namespace collective::frontend {

struct Param {
  std::string name;  // "conv1.weight"; the key for fusion, broadcast and checkpoints
  Tensor value;
  Tensor grad;
};

// A non-trained state tensor (BatchNorm running statistics).
struct Buffer {
  std::string name;
  Tensor value;
};

class Module {
 public:
  explicit Module(std::string name) : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  virtual Tensor backward(const Tensor& dy) = 0;

  virtual std::vector<Param*> parameters() { return {}; }
  virtual std::vector<Buffer*> buffers() { return {}; }
  virtual void setTraining(bool training) { training_ = training; }
  bool training() const { return training_; }

  // The first layer's input gradient is never used; skipping it saves a GEMM + col2im.
  void setNeedsInputGrad(bool needs) { needsInputGrad_ = needs; }
  bool needsInputGrad() const { return needsInputGrad_; }

  const std::string& name() const { return name_; }

 protected:
  Param makeParam(const char* suffix, Shape shape) const {
    return Param{name_ + "." + suffix, Tensor(shape), Tensor(shape)};
  }

  std::string name_;
  bool training_ = true;
  bool needsInputGrad_ = true;
};

}  // namespace collective::frontend
