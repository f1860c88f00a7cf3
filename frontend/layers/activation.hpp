// Shape-preserving and shape-only layers: ReLU, Flatten.
#pragma once

#include "module.hpp"

namespace collective::frontend {

class ReLU : public Module {
 public:
  explicit ReLU(std::string name) : Module(std::move(name)) {}
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

 private:
  Tensor y_, dx_;  // y_ doubles as the mask for backward
};

// [B, d1, d2, ...] -> [B, d1*d2*...]; a view, no copy.
class Flatten : public Module {
 public:
  explicit Flatten(std::string name) : Module(std::move(name)) {}
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

 private:
  Shape inShape_;
};

}  // namespace collective::frontend
