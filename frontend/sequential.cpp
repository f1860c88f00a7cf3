#include "sequential.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace collective::frontend {

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  if (boundary_ != Precision::Float32) {
    h = x.clone();
    roundInPlace(boundary_, h.data(), h.numel());
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    ProfileScope t(profile_, profile_ ? fwdSection_[i] : 0);
    h = layers_[i]->forward(h);
    if (boundary_ != Precision::Float32) roundInPlace(boundary_, h.data(), h.numel());
  }
  return h;
}

Tensor Sequential::backward(const Tensor& dy) {
  Tensor g = dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    // Drop our reference first so the layer can reuse its buffers for the result.
    Tensor in = std::move(g);
    {
      ProfileScope t(profile_, profile_ ? bwdSection_[i] : 0);
      g = layers_[i]->backward(in);
      if (boundary_ != Precision::Float32 && g.defined())
        roundInPlace(boundary_, g.data(), g.numel());
    }
    if (hook_) {
      ProfileScope t(profile_, hookSection_);
      hook_(*layers_[i]);
    }
  }
  return g;
}

void Sequential::setProfile(Profile* profile) {
  profile_ = profile;
  fwdSection_.clear();
  bwdSection_.clear();
  if (!profile_) return;
  for (auto& layer : layers_) fwdSection_.push_back(profile_->section(layer->name() + " fwd"));
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it)
    bwdSection_.push_back(profile_->section((*it)->name() + " bwd"));
  std::reverse(bwdSection_.begin(), bwdSection_.end());
  hookSection_ = profile_->section("grad hook (to engine)");
}

std::unique_ptr<Sequential> Sequential::extract(size_t begin, size_t end, std::string name) {
  COLL_CHECK_ARG(begin <= end && end <= layers_.size(), "Sequential::extract: layers [", begin,
                 ", ", end, ") of ", layers_.size());
  auto part = std::make_unique<Sequential>(std::move(name));
  for (size_t i = begin; i < end; ++i) part->layers_.push_back(std::move(layers_[i]));
  layers_.erase(layers_.begin() + static_cast<std::ptrdiff_t>(begin),
                layers_.begin() + static_cast<std::ptrdiff_t>(end));
  part->setTraining(training_);
  return part;
}

std::vector<Param*> Sequential::parameters() {
  std::vector<Param*> all;
  for (auto& layer : layers_)
    for (Param* p : layer->parameters()) all.push_back(p);
  return all;
}

std::vector<Buffer*> Sequential::buffers() {
  std::vector<Buffer*> all;
  for (auto& layer : layers_)
    for (Buffer* b : layer->buffers()) all.push_back(b);
  return all;
}

void Sequential::setTraining(bool training) {
  training_ = training;
  for (auto& layer : layers_) layer->setTraining(training);
}

}  // namespace collective::frontend
