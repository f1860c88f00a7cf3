#include "model.hpp"

#include "base/error.hpp"
#include "layers/activation.hpp"
#include "layers/batchnorm.hpp"
#include "layers/conv2d.hpp"
#include "layers/linear.hpp"
#include "layers/pooling.hpp"
#include "layers/sync_batchnorm.hpp"

namespace collective::frontend {

namespace {

void addNorm(Sequential& m, const ModelOptions& o, const char* name, int64_t channels) {
  if (o.syncBatchNorm)
    m.add<SyncBatchNorm>(name, channels, o.bnComm);
  else
    m.add<BatchNorm>(name, channels);
}

}  // namespace

std::unique_ptr<Sequential> makeFashionCnn(const ModelOptions& o) {
  COLL_CHECK_ARG(!o.syncBatchNorm || o.bnComm, "makeFashionCnn: syncBatchNorm needs bnComm");
  auto m = std::make_unique<Sequential>("model");
  // Each layer draws from its own stream of the seed, so adding a layer does not change
  // the initial values of the others.
  m->add<Conv2d>("conv1", 1, 16, 3, 1, 1, o.seed * 1000 + 1).setNeedsInputGrad(false);
  addNorm(*m, o, "bn1", 16);
  // ReLU then max pooling, fused (MaxPool2d's fuseRelu: the same values and gradients).
  m->add<MaxPool2d>("pool1", 2, 2, true);
  m->add<Conv2d>("conv2", 16, 32, 3, 1, 1, o.seed * 1000 + 2);
  addNorm(*m, o, "bn2", 32);
  m->add<MaxPool2d>("pool2", 2, 2, true);
  m->add<Flatten>("flatten");
  m->add<Linear>("fc1", 32 * 7 * 7, 128, o.seed * 1000 + 3);
  m->add<ReLU>("relu3");
  m->add<Linear>("fc2", 128, 10, o.seed * 1000 + 4);
  return m;
}

}  // namespace collective::frontend
