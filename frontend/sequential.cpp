#include "sequential.hpp"

namespace collective::frontend {

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& layer : layers_) h = layer->forward(h);
  return h;
}

Tensor Sequential::backward(const Tensor& dy) {
  Tensor g = dy;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    // Drop our reference first so the layer can reuse its buffers for the result.
    Tensor in = std::move(g);
    g = (*it)->backward(in);
    if (hook_) hook_(**it);
  }
  return g;
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
