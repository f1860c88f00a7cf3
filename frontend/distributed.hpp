// Data-parallel training over the hvd engine, in the spirit of hvd.DistributedOptimizer.
//
// Compression applies to gradients of at least kMinCompressedElements elements; smaller
// ones (biases, BatchNorm, small convolutions: ~3% of the reference model's bytes) go
// dense, as in Deep Gradient Compression: top-k would delay them for many steps while
// saving next to nothing.
//
// Each layer's parameter gradients are handed to the engine (allreduce_async, Average,
// optional compression) the moment that layer's backward returns, so the reduction of
// the last layers overlaps the backward of the first ones; step() waits for all of them
// and then applies the wrapped optimizer. Every rank submits the same names, so the
// engine's negotiation matches them even if they were submitted in different orders.
//
// reduceAtStep(comm) trades that overlap for one blocking all-reduce of every gradient,
// packed into one buffer, inside step(). Overlap needs a core for the engine's thread
// while the training thread computes; with as many ranks on a host as it has cores
// (2 ranks on a 2-core machine) there is none, and the engine's thread only preempts the
// computation it was meant to hide behind (and its negotiation adds a round trip at the
// end of every step).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "collective/hvd.hpp"
#include "collective/memory.hpp"
#include "precision.hpp"
#include "profile.hpp"
#include "sequential.hpp"
#include "sgd.hpp"

namespace collective::frontend {

class DistributedOptimizer {
 public:
  static constexpr int64_t kMinCompressedElements = 16384;

  // Installs itself as model's gradient-ready hook; model and ctx must outlive it.
  // momentumCorrection: fold momentum into the gradient before the reduction
  // (Sgd::foldMomentum); the default turns it on for top-k, where it recovers accuracy.
  DistributedOptimizer(Sequential& model, Sgd& sgd, hvd::Context& ctx,
                       hvd::Compression compression = hvd::Compression::none());
  DistributedOptimizer(Sequential& model, Sgd& sgd, hvd::Context& ctx, hvd::Compression compression,
                       bool momentumCorrection);
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  // Waits for every gradient of this step (submitting any the hook did not see), then
  // runs the optimizer step.
  void step();
  // From now on, step() reduces all gradients in one blocking all-reduce (Average) on
  // `comm` (same ranks as the engine's, not used by anything else concurrently) instead
  // of through the engine. Uncompressed only: throws collInvalidUsage with compression.
  void reduceAtStep(collComm_t comm);
  // reduceAtStep's buffer of every gradient (empty before the first step); the
  // parameters' grads are views into it.
  std::span<const float> packedGradients() const { return {packed_.get(), packedSize_}; }
  bool reducesAtStep() const { return atStep_ != nullptr; }
  Sgd& sgd() { return sgd_; }
  // Times the gradient all-reduce (reduceAtStep: the blocking call; overlapped: the wait
  // in step() for what backward did not hide) and the optimizer update.
  void setProfile(Profile* profile);
  // Gradients travel as `p` (bf16/fp16: half the bytes): reduceAtStep converts the packed
  // buffer and all-reduces 16-bit values; the engine compresses every tensor to it.
  void setReducePrecision(Precision p);
  // Runs after the all-reduce, before the update; returning false skips the update (a
  // loss-scaling overflow). The reduced gradients are the same on every rank.
  void setBeforeUpdate(std::function<bool()> f) { beforeUpdate_ = std::move(f); }
  // Gradient bytes each rank contributes to the all-reduce per step.
  int64_t bytesPerStep() const;

 private:
  void submit(Param& p);
  void stepPacked();
  bool gradsArePacked() const;
  void packGradients();

  Sequential& model_;
  Sgd& sgd_;
  hvd::Context& ctx_;
  hvd::AllreduceOptions opts_;
  bool fold_;
  hvd::AllreduceOptions denseOpts_;
  std::vector<hvd::Handle> pending_;
  std::vector<Param*> submitted_;
  bool compressed_ = false;
  collComm_t atStep_ = nullptr;
  // Every gradient, for reduceAtStep: one collMemAlloc buffer, which a peer process on
  // this host reads and writes through a mapping of its own (no system call per piece).
  // From the first step on, each parameter's grad is a view into it (as DDP's
  // gradient_as_bucket_view), so the all-reduce needs no copy in or out.
  std::shared_ptr<float[]> packed_;
  size_t packedSize_ = 0;
  Precision reducePrecision_ = Precision::Float32;
  std::unique_ptr<collective::SharedArray<uint16_t>> reduced_;
  std::function<bool()> beforeUpdate_;
  Profile* profile_ = nullptr;
  size_t reduceSection_ = 0, updateSection_ = 0;
};

hvd::Tensor hvdView(Tensor& t);

// Rank `root`'s parameters and buffers (BatchNorm running statistics) to every rank.
void broadcastParameters(Sequential& model, hvd::Context& ctx, int root = 0);
// Rank `root`'s buffers only: with per-rank BatchNorm the running statistics drift apart,
// and evaluating every replica with rank 0's keeps them one model (DDP's broadcast_buffers).
void broadcastBuffers(Sequential& model, hvd::Context& ctx, int root = 0);
// Rank `root`'s momentum buffers and step count to every rank.
void broadcastOptimizerState(Sgd& sgd, hvd::Context& ctx, int root = 0);

}  // namespace collective::frontend
