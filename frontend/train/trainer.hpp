// The data-parallel training loop of train_fashion_mnist, usable in-process by tests
// (one Trainer per rank thread).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "collective.h"
#include "collective/hvd.hpp"
#include "data/fashion_mnist.hpp"
#include "data/sampler.hpp"
#include "distributed.hpp"
#include "loss.hpp"
#include "precision.hpp"
#include "profile.hpp"
#include "sequential.hpp"
#include "sgd.hpp"
#include "train/options.hpp"

namespace collective::frontend {

struct EpochResult {
  int64_t epoch = 0;
  double seconds = 0;       // training only, evaluation excluded
  double trainLoss = 0;     // mean over all ranks' samples
  double testAccuracy = 0;  // fraction in [0, 1]
  int64_t images = 0;       // trained by all ranks together
};

class Trainer {
 public:
  // ctx: the engine over this rank's communicator; aux: another communicator over the
  // same ranks, used only by SyncBatchNorm and metric reductions (never concurrently with
  // itself). log: where rank 0 reports (nullptr: silent).
  Trainer(const TrainOptions& options, hvd::Context& ctx, collComm_t aux, const Dataset& train,
          const Dataset& test, FILE* log);
  ~Trainer();

  // Broadcasts (or loads) the initial state, trains the remaining epochs, returns them.
  std::vector<EpochResult> run();
  // Test accuracy of the current model over all ranks.
  double evaluate();

  Sequential& model() { return *model_; }
  Sgd& sgd() { return *sgd_; }
  int64_t localBatch() const { return localBatch_; }
  DistributedOptimizer& optimizer() { return *dopt_; }
  MixedPrecision* mixedPrecision() { return mp_.get(); }

 private:
  int64_t restoreOrBroadcast();
  EpochResult trainEpoch(int64_t epoch);
  void report(const EpochResult& r) const;
  void summary(const std::vector<EpochResult>& results) const;

  TrainOptions o_;
  hvd::Context& ctx_;
  collComm_t aux_;
  const Dataset& train_;
  const Dataset& test_;
  FILE* log_;
  int rank_, size_;
  int64_t localBatch_;
  DistributedSampler sampler_;
  std::unique_ptr<Sequential> model_;
  std::unique_ptr<Sgd> sgd_;
  std::unique_ptr<DistributedOptimizer> dopt_;
  int cpus_ = 1;  // CPUs this rank may run on
  SoftmaxCrossEntropy loss_;
  std::unique_ptr<MixedPrecision> mp_;
  Profile profile_;
  size_t dataSection_ = 0, lossSection_ = 0;
};

}  // namespace collective::frontend
