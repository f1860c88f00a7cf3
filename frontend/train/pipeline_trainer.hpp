// Pipeline model parallelism (GPipe) for train_fashion_mnist --mode pipeline.
//
// The world's W ranks form R = W / P replicas of a P-stage pipeline: rank = replica * P
// + stage. Each stage holds a contiguous run of the reference CNN's layers (split by an
// estimate of their compute) and talks to its neighbours with point-to-point calls on
// its replica's communicator: activations forward, their gradients backward. A step's
// local batch is cut into M micro-batches; stage s works on micro-batch m + 1 while stage
// s + 1 works on m, so the stages overlap. All M forwards run first, then the backwards
// in reverse order. A layer keeps the context of one forward for its backward, so each
// stage holds M copies of its layers, one per micro-batch, sharing one set of parameter
// values and BatchNorm running statistics (memory for M contexts instead of GPipe's
// re-materialisation, which would redo M - 1 forwards). Parameter gradients are summed
// over the micro-batches, averaged over the
// replicas of the stage (all-reduce on the stage's data-parallel communicator, which also
// carries SyncBatchNorm), then each stage steps its own parameters.
//
// BatchNorm normalises each micro-batch by its own statistics (over all replicas with
// SyncBatchNorm), as GPipe does: the gradients are those of one rank processing the same
// micro-batches one after another and summing their gradients (tested).
#pragma once

#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collective.h"
#include "comm.hpp"
#include "data/fashion_mnist.hpp"
#include "data/sampler.hpp"
#include "loss.hpp"
#include "sequential.hpp"
#include "sgd.hpp"
#include "train/options.hpp"
#include "train/trainer.hpp"

namespace collective::frontend {

class PipelineTrainer {
 public:
  // world: every rank of the job (its size must be a multiple of options.stages).
  PipelineTrainer(const TrainOptions& options, collComm_t world, const Dataset& train,
                  const Dataset& test, FILE* log);
  ~PipelineTrainer();

  std::vector<EpochResult> run();
  double evaluate();
  // One step's forward and backward over this replica's samples `batch` (sum of the
  // micro-batches' gradients, averaged over replicas) without the update. Returns this
  // replica's mean loss (last stage; 0 elsewhere).
  double computeGradients(std::span<const int64_t> batch);
  void applyUpdate(float lr);

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  int replica() const { return replica_; }
  Sequential& stageModel() { return *stageModel_; }
  // Layers [first, last) of the full model this stage holds.
  size_t firstLayer() const { return first_; }
  size_t lastLayer() const { return last_; }
  // Bytes this rank sent per step on average (activations, gradients, all-reduce).
  double bytesPerStep() const { return steps_ ? sentBytes_ / static_cast<double>(steps_) : 0.0; }

  // Splits `n` layers with estimated costs into `parts` contiguous runs, minimising the
  // most expensive run; returns the first layer of each run and n.
  static std::vector<size_t> splitLayers(const std::vector<double>& costs, int parts);

 private:
  Tensor receive(const Shape& perSample, int64_t n, int from);
  void send(const Tensor& t, int to);
  void accumulateGradients(Sequential& copy, bool first);
  EpochResult trainEpoch(int64_t epoch);

  TrainOptions o_;
  collComm_t world_;
  OwnedComm pipe_, dp_;
  const Dataset& train_;
  const Dataset& test_;
  FILE* log_;
  int rank_, size_, stages_, replicas_, stage_, replica_;
  int64_t localBatch_;
  size_t first_ = 0, last_ = 0;
  Shape inShape_, outShape_;  // per sample, at this stage's input and output
  DistributedSampler sampler_;
  std::vector<std::unique_ptr<Sequential>> copies_;  // one per micro-batch
  Sequential* stageModel_ = nullptr;                  // copies_[0]: the parameters
  std::unique_ptr<Sgd> sgd_;
  std::vector<std::vector<float>> gradSum_;
  SoftmaxCrossEntropy loss_;
  double sentBytes_ = 0;
  int64_t steps_ = 0;
};

}  // namespace collective::frontend
