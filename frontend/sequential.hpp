// A chain of layers. backward() walks it in reverse and reports each layer as soon as
// its parameter gradients are final, which is when DistributedOptimizer hands them to
// the fusion engine: reduction of late layers overlaps backward of early ones.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "module.hpp"
#include "precision.hpp"
#include "profile.hpp"

namespace collective::frontend {

class Sequential : public Module {
 public:
  using GradReadyHook = std::function<void(Module&)>;

  explicit Sequential(std::string name = "model") : Module(std::move(name)) {}

  template <typename Layer, typename... Args>
  Layer& add(Args&&... args) {
    auto layer = std::make_unique<Layer>(std::forward<Args>(args)...);
    Layer& ref = *layer;
    layers_.push_back(std::move(layer));
    return ref;
  }

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  std::vector<Param*> parameters() override;
  std::vector<Buffer*> buffers() override;
  void setTraining(bool training) override;

  // Called after each layer's backward (with that layer), last layer first.
  void setGradReadyHook(GradReadyHook hook) { hook_ = std::move(hook); }

  // Rounds the input, every layer's output and every backward gradient to `p` (mixed
  // precision: the values layers exchange are 16-bit; Float32 turns it off).
  void setBoundaryPrecision(Precision p) { boundary_ = p; }
  Precision boundaryPrecision() const { return boundary_; }

  // Times every layer's forward and backward (and the hook) into `profile` (null: off).
  void setProfile(Profile* profile);

  // Moves layers [begin, end) into a new Sequential (pipeline stages); this one keeps
  // the others and must not run afterwards.
  std::unique_ptr<Sequential> extract(size_t begin, size_t end, std::string name);

  size_t size() const { return layers_.size(); }
  Module& layer(size_t i) { return *layers_.at(i); }

 private:
  std::vector<std::unique_ptr<Module>> layers_;
  GradReadyHook hook_;
  Profile* profile_ = nullptr;
  Precision boundary_ = Precision::Float32;
  std::vector<size_t> fwdSection_, bwdSection_;
  size_t hookSection_ = 0;
};

}  // namespace collective::frontend
