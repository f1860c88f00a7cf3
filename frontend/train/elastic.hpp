// Elastic data-parallel training (train_fashion_mnist --elastic), as Horovod's elastic
// mode: a rank that dies does not end the run.
//
// Every rank keeps an in-memory commit of the training state (Trainer::setCommit: model
// parameters and buffers, optimizer state, epoch, step and finished epochs) taken every
// --commit-every steps and at every epoch end. When a collective fails because a peer is
// gone (collRemoteError, collTimeout or collRevoked, whether it came from the engine's
// gradient all-reduce, a broadcast, a metric reduction or SyncBatchNorm), each survivor
//   1. revokes the engine's communicator and its duplicate, so that every other survivor
//      leaves whatever collective it waits in;
//   2. stops the engine and drops the trainer (model, optimizer, duplicate);
//   3. asks collCommGetFailedRanks until the answer holds still and shrinks the
//      communicator without those ranks (collCommShrink, which fails when survivors pass
//      different sets: then it asks again and retries);
//   4. with --elastic-grow, asks collectiverun --elastic for ranks up to
//      COLL_ELASTIC_MAX_NP (a grow-* file in COLL_ELASTIC_DIR) and grows the communicator
//      with them (collCommGrow); a replacement runs this program with COLL_JOIN_ID, joins
//      in collCommInitFromEnv and takes rank 0's commit like the others;
//   5. starts a new engine and a new trainer on the new communicator, restores its own
//      commit and then takes new rank 0's (broadcast), so all replicas are equal again;
//   6. goes on from the committed step with the rest of the epoch re-sharded over the new
//      number of ranks (DistributedSampler with a start position): the global batch stays
//      the same, so the run takes the samples an uninterrupted run would have taken.
// Fewer ranks than COLL_ELASTIC_MIN_NP (collectiverun --elastic --min-np, default 1), or
// a failure that is not a lost peer (bad input, a file that cannot be read), ends the run
// with the error.
#pragma once

#include <cstdio>
#include <exception>
#include <vector>

#include "collective.h"
#include "comm.hpp"
#include "data/fashion_mnist.hpp"
#include "train/options.hpp"

namespace collective::frontend {

// Whether `error` means a peer was lost: a library or engine error with collRemoteError,
// collTimeout or collRevoked, or (the engine reports a stop in its own words) any other
// library error but bad arguments while collCommGetFailedRanks(comm) finds a rank gone.
bool isPeerFailure(const std::exception& error, collComm_t comm);

// The ranks of `comm` found dead, once the answer has held still for 100 ms (at most
// 10 s of asking).
std::vector<int> settledFailedRanks(collComm_t comm);

// Trains as Trainer::run over `world` (ranks of the job), surviving lost ranks as above.
// Every rank prints its recovery lines to `log`; rank 0 of the final communicator reports
// as Trainer does. Under COLL_JOIN_ID (a replacement rank) it starts from rank 0's commit.
void runElastic(const TrainOptions& options, OwnedComm world, const Dataset& train,
                const Dataset& test, FILE* log);

}  // namespace collective::frontend
