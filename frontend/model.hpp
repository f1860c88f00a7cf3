// The reference Fashion-MNIST network:
//   conv 1->16 3x3 pad 1, BN, ReLU, maxpool 2; conv 16->32 3x3 pad 1, BN, ReLU, maxpool 2;
//   linear 1568->128, ReLU; linear 128->10.
#pragma once

#include <cstdint>
#include <memory>

#include "collective.h"
#include "sequential.hpp"

namespace collective::frontend {

struct ModelOptions {
  uint64_t seed = 1;
  // SyncBatchNorm over bnComm (which must be dedicated to it) instead of BatchNorm.
  bool syncBatchNorm = false;
  collComm_t bnComm = nullptr;
};

std::unique_ptr<Sequential> makeFashionCnn(const ModelOptions& options);

}  // namespace collective::frontend
