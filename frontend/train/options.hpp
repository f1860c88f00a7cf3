// Command-line options of train_fashion_mnist.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collective/hvd.hpp"

namespace collective::frontend {

struct TrainOptions {
  int64_t epochs = 2;
  int64_t globalBatch = 64;  // split evenly over the ranks
  float lr = 0.05f;
  // "constant", or "cosine": lr * (1 + cos(pi * step / total steps)) / 2, which anneals
  // to zero at the end of the last epoch.
  std::string lrSchedule = "cosine";
  float momentum = 0.9f;
  float weightDecay = 0.0f;
  bool syncBatchNorm = true;
  hvd::Compression compression{};
  // "auto" (on for top-k), "on" or "off": see DistributedOptimizer / Sgd::foldMomentum.
  std::string momentumCorrection = "auto";
  // "overlap" (each layer's gradients to the engine as backward produces them), "step"
  // (one blocking all-reduce of all gradients in the optimizer step) or "auto": step when
  // the host has no core to spare for overlapping (gradSyncAtStep).
  std::string gradSync = "auto";
  uint64_t seed = 1;
  std::string dataDir;
  std::string savePath;    // written by rank 0 after every epoch
  std::string loadPath;    // read by rank 0 before training, then broadcast
  int64_t trainLimit = 0;  // > 0: use only the first N training samples
  int64_t testLimit = 0;
  int64_t evalBatch = 500;
  bool progress = true;  // progress bar on rank 0
  int blasThreads = 1;
  // "dp" (data parallel, Trainer), "pipeline" (PipelineTrainer) or "ps" (parameter
  // server, PsTrainer).
  std::string mode = "dp";
  int stages = 2;            // pipeline: stages per replica (ranks = stages * replicas)
  int microBatches = 4;      // pipeline: micro-batches per step (GPipe)
  int servers = 1;           // ps: server ranks (the others are workers)
  bool psAsync = false;      // ps: no barrier per step
  int64_t maxStaleness = 4;
  double psTimeout = 60;     // ps: seconds of silence after which a peer counts as dead  // ps async: a worker waits when it is more versions ahead
  std::string precision = "fp32";  // fp32 | bf16 | fp16 (mixed precision, MixedPrecision)
  bool profile = false;     // per-layer timers, printed by rank 0 after every epoch
  int64_t maxSteps = 0;     // > 0: at most this many steps per epoch (quick runs)
  // Survive lost ranks (collectiverun --elastic): see frontend/train/elastic.hpp.
  bool elastic = false;
  int64_t commitEvery = 20;  // elastic: steps between in-memory commits (and every epoch end)
  bool elasticGrow = false;  // elastic: after a shrink, grow back to COLL_ELASTIC_MAX_NP

  static std::string usage();
  // Throws coll::Error (collInvalidArgument) naming the bad flag.
  static TrainOptions parse(const std::vector<std::string>& args);
  std::string compressionName() const;
  bool useMomentumCorrection() const;
  // Whether gradients are reduced in the step: "step", or "auto" without compression when
  // the ranks on this host (localRanks) have no more CPUs among them than there are ranks
  // (cpus: the CPUs this rank may run on).
  bool gradSyncAtStep(int localRanks, int cpus) const;
  // Learning rate for optimizer step `step` (0-based) of `totalSteps`.
  float lrAt(int64_t step, int64_t totalSteps) const;
};

}  // namespace collective::frontend
