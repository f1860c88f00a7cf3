#include "sgd.hpp"

#include "blas.hpp"

#include "base/error.hpp"

namespace collective::frontend {

Sgd::Sgd(std::vector<Param*> params, SgdOptions options)
    : params_(std::move(params)), options_(options) {
  COLL_CHECK_ARG(options.lr >= 0 && options.momentum >= 0 && options.weightDecay >= 0,
                 "Sgd: lr=", options.lr, " momentum=", options.momentum,
                 " weight_decay=", options.weightDecay, " must be non-negative");
  for (Param* p : params_) momentum_.push_back({p->name + ".momentum", Tensor(p->value.shape())});
}

FRONTEND_VECTOR_CLONES
void Sgd::step() {
  const float lr = options_.lr, mu = options_.momentum, wd = options_.weightDecay;
  for (size_t i = 0; i < params_.size(); ++i) {
    float* __restrict p = params_[i]->value.data();
    const float* __restrict g = params_[i]->grad.data();
    float* __restrict buf = momentum_[i].value.data();
    const int64_t n = params_[i]->value.numel();
    if (mu == 0.0f) {
      for (int64_t j = 0; j < n; ++j) p[j] -= lr * (g[j] + wd * p[j]);
      continue;
    }
    const float keep = steps_ == 0 ? 0.0f : mu;  // the first step seeds buf with g
    for (int64_t j = 0; j < n; ++j) {
      buf[j] = keep * buf[j] + (g[j] + wd * p[j]);
      p[j] -= lr * buf[j];
    }
  }
  ++steps_;
}

void Sgd::foldMomentum(size_t i) {
  COLL_CHECK_ARG(i < params_.size(), "Sgd::foldMomentum: parameter ", i, " of ", params_.size());
  const float mu = options_.momentum, wd = options_.weightDecay;
  const float keep = steps_ == 0 ? 0.0f : mu;
  const float* __restrict p = params_[i]->value.data();
  float* __restrict g = params_[i]->grad.data();
  float* __restrict buf = momentum_[i].value.data();
  for (int64_t j = 0, n = params_[i]->value.numel(); j < n; ++j) {
    buf[j] = keep * buf[j] + (g[j] + wd * p[j]);
    g[j] = buf[j];
  }
}

FRONTEND_VECTOR_CLONES
void Sgd::stepFolded() {
  const float lr = options_.lr;
  for (Param* prm : params_) {
    float* __restrict p = prm->value.data();
    const float* __restrict g = prm->grad.data();
    for (int64_t j = 0, n = prm->value.numel(); j < n; ++j) p[j] -= lr * g[j];
  }
  ++steps_;
}

std::vector<Buffer*> Sgd::state() {
  std::vector<Buffer*> s;
  for (auto& b : momentum_) s.push_back(&b);
  return s;
}

}  // namespace collective::frontend
