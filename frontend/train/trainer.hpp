// The data-parallel training loop of train_fashion_mnist, usable in-process by tests
// (one Trainer per rank thread).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
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

// Elastic mode (--elastic): the training state that the survivors of a lost rank roll
// back to, kept in memory by every rank. Survivors may hold commits of different steps
// (a rank can finish an all-reduce that another saw fail); on restore, new rank 0's wins.
struct ElasticCommit {
  bool valid = false;
  // A rank that joined a grown job: it has no state of its own and takes rank 0's.
  bool joining = false;
  int64_t epoch = 0;  // training resumes at step `step` of epoch `epoch`
  int64_t step = 0;
  int64_t sgdSteps = 0;
  std::vector<Tensor> tensors;       // parameters, buffers, optimizer state
  std::vector<EpochResult> results;  // epochs finished
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
  // With a commit (setCommit) that holds a state, every rank restores its own and then
  // takes rank 0's (parameters, optimizer state, position, finished epochs) instead.
  std::vector<EpochResult> run();
  // Elastic mode: commits every options.commitEvery steps and at every epoch end into
  // *commit, which must outlive the run.
  void setCommit(ElasticCommit* commit) { commit_ = commit; }
  // Test accuracy of the current model over all ranks.
  double evaluate();

  Sequential& model() { return *model_; }
  Sgd& sgd() { return *sgd_; }
  int64_t localBatch() const { return localBatch_; }
  DistributedOptimizer& optimizer() { return *dopt_; }
  MixedPrecision* mixedPrecision() { return mp_.get(); }

 private:
  int64_t restoreOrBroadcast();
  // The commit's state into the model, then rank 0's to everyone; returns the position.
  std::pair<int64_t, int64_t> restoreCommit();
  void saveCommit(int64_t epoch, int64_t step);
  std::vector<Tensor*> stateTensors();
  EpochResult trainEpoch(int64_t epoch, int64_t firstStep);
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
  ElasticCommit* commit_ = nullptr;
  std::vector<EpochResult> results_;
};

}  // namespace collective::frontend
