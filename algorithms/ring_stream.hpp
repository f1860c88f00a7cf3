// The pipelined ring that ring all-reduce, reduce-scatter and all-gather are made of.
//
// At step t every rank sends block (base - t) to its successor and receives block
// (base - t - 1) from its predecessor (mod n). The first `reduceSteps` steps combine the
// received block with the rank's own contribution; later steps only store it. Because
// the block sent at step t is the one received at step t - 1, chunk k of step t may
// leave as soon as chunk k of step t - 1 has arrived (and been reduced), so all steps
// overlap: the ring is a pipeline of chunks, not a sequence of steps.
#pragma once

#include <cstddef>

#include "algorithms/exec.hpp"
#include "collective.h"

namespace coll {

struct RingStream {
  int base = 0;         // block sent at step 0
  int steps = 0;        // number of steps
  int reduceSteps = 0;  // the first reduceSteps steps reduce
  Blocks blocks;        // block geometry in elements
  collDataType_t dt = collFloat32;
  collRedOp_t op = collSum;
  const char* firstSrc = nullptr;  // data of block `base` sent at step 0
  // Where block `base`'s data must also be copied (an out-of-place all-gather's own
  // block), or null. Step 0's sends copy it piece by piece where the link supports it
  // (Xfer::mirror), so firstSrc is read once for both copies; otherwise it is copied
  // before the ring starts.
  char* firstMirror = nullptr;
  const char* local = nullptr;     // own contribution, indexed by block offset
  char* dstBase = nullptr;         // where block results live, indexed by block offset
  int redirectBlock = -1;          // ... except this block, which lives at redirectPtr
  char* redirectPtr = nullptr;
  bool finishAverage = false;      // divide by n after the last reduction (collAvg)
  // Topology-aware ring order: order[p] is the rank at ring position p (null: rank
  // order). base and the step arithmetic then count ring positions; with
  // blocksFollowRanks the block of position p is rank order[p]'s (all-gather,
  // reduce-scatter), otherwise block p (all-reduce, where any fixed assignment works).
  const int* order = nullptr;
  bool blocksFollowRanks = false;

  char* dst(int block, size_t esize) const {
    return block == redirectBlock ? redirectPtr : dstBase + blocks.off(block) * esize;
  }
};

void runRingStream(Team& comm, Progress& pg, const RingStream& rs);

// Chunk size (bytes) and pipeline depth used by the pipelined algorithms.
size_t pipelineChunkBytes(const Team& comm);
int pipelineDepth(const Team& comm);
// The same, parsed from a Config (the communicator caches them: Comm::hot()).
size_t pipelineChunkBytes(const Config& cfg);
int pipelineDepth(const Config& cfg);

}  // namespace coll
