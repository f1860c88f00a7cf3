// BatchNorm whose training statistics cover the global batch of all ranks.
//
// Forward: each rank all-gathers (count, mean, biased variance) per channel and combines
// them in rank order (Chan et al.'s parallel update), so ranks may hold different batch
// sizes and every rank computes bit-identical statistics. Backward: the per-channel sums
// of dy and dy*xhat are all-reduced, giving each rank its exact share of the gradient of
// the global-batch normalisation. Eval mode uses the running statistics, no traffic.
//
// The communicator must not carry other traffic concurrently (the gradient engine runs
// during backward): give SyncBatchNorm its own, e.g. OwnedComm::duplicate(world).
#pragma once

#include "collective.h"
#include "layers/batchnorm.hpp"

namespace collective::frontend {

class SyncBatchNorm : public BatchNorm {
 public:
  SyncBatchNorm(std::string name, int64_t channels, collComm_t comm, double eps = 1e-5,
                double momentum = 0.1);

 protected:
  Moments batchMoments(const Moments& local) override;
  void reduceGradSums(std::vector<double>& sums) override;

 private:
  collComm_t comm_;
  int nranks_;
};

}  // namespace collective::frontend
