// Parameter-server training for train_fashion_mnist --mode ps.
//
// Ranks 0..S-1 are servers, the others workers. The model's parameters, flattened in
// parameter order, are cut into S contiguous shards; server s keeps shard s and its SGD
// momentum and applies the updates. A worker pulls every shard, computes the gradient of
// its local batch (per-worker BatchNorm), pushes each shard of it to its server and gets
// the updated shard back, all with point-to-point calls on one two-rank communicator per
// (server, worker) pair, so that a failed peer disturbs no other pair.
//
//  * sync: a server waits for the gradient of every live worker, applies their average
//    (one version per step) and answers them all: a barrier per step, the same updates as
//    data parallelism with per-rank BatchNorm.
//  * async (--ps-async): a server applies each gradient when it arrives and answers at
//    once. A gradient computed on version v and applied at version u has staleness u - v
//    (counted in a histogram). A worker that has pushed more than K (--max-staleness)
//    steps more than the slowest live worker gets its answer only when that one catches
//    up (stale synchronous parallel).
//
// A worker the server hears nothing from for --ps-timeout seconds while it owes a message
// is declared dead: its pair communicator is aborted and the others go on without it
// (sync: the average is over the live workers). A server that does not answer within
// twice the timeout (it may itself be waiting that long for a dead worker), or whose link
// fails, is an error on the worker naming that server.
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "collective.h"
#include "data/fashion_mnist.hpp"
#include "data/sampler.hpp"
#include "loss.hpp"
#include "sequential.hpp"
#include "train/options.hpp"
#include "train/trainer.hpp"

namespace collective::frontend {

struct PsFaults {
  // Tests: a worker (server) stops answering after this many steps (updates) and aborts
  // its communicators, as a crashed process would; -1: never.
  int64_t workerDiesAfter = -1, serverDiesAfter = -1;
};

struct PsServerStats {
  int64_t updates = 0, deadWorkers = 0;
  std::map<int64_t, int64_t> staleness;  // staleness -> gradients applied with it
};

class PsTrainer {
 public:
  PsTrainer(const TrainOptions& options, collComm_t world, const Dataset& train,
            const Dataset& test, FILE* log, PsFaults faults = {});
  ~PsTrainer();

  // Servers: serve until every worker is done or dead. Workers: train all epochs.
  // Returns the first worker's epochs (empty elsewhere).
  std::vector<EpochResult> run();

  bool isServer() const { return rank_ < servers_; }
  const PsServerStats& serverStats() const { return stats_; }
  Sequential& model() { return *model_; }
  double workerSeconds() const { return timeout_; }

 private:
  struct Link;
  void serve();
  std::vector<EpochResult> work();
  void pullAll(bool push, int64_t clock);
  void waitFor(collRequest_t& req, Link& link, const char* what);
  double evaluate();

  TrainOptions o_;
  collComm_t world_;
  const Dataset& train_;
  const Dataset& test_;
  FILE* log_;
  PsFaults faults_;
  int rank_, size_, servers_, workers_;
  double timeout_;
  std::vector<std::unique_ptr<Link>> links_;  // server: one per worker; worker: per server
  std::vector<size_t> shardStart_;            // S + 1 offsets into the flat parameters
  std::unique_ptr<Sequential> model_;
  SoftmaxCrossEntropy loss_;
  PsServerStats stats_;
  std::vector<int64_t> versions_;  // worker: version of each shard it holds
};

}  // namespace collective::frontend
