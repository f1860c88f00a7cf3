// Splits a dataset over ranks, PyTorch DistributedSampler-like but strictly disjoint.
//
// Every rank draws the same permutation from (seed, epoch); rank r takes positions
// r, r + R, r + 2R, ... of it. The last size % R positions are left out so all ranks get
// the same number of samples and hence the same number of steps (a rank with one step
// more would wait forever in an all-reduce). Because shards interleave, step s of R ranks
// with local batch b covers exactly the samples that step s of one rank with batch R*b
// covers.
//
// `start` (a multiple of the number of ranks) skips the first `start` positions of the
// permutation: after step s of a global batch G, start = s * G resumes the epoch on any
// number of ranks that divides G, with exactly the samples the uninterrupted run would
// have taken next (elastic training re-shards the rest of an epoch over the survivors).
#pragma once

#include <cstdint>
#include <vector>

namespace collective::frontend {

class DistributedSampler {
 public:
  DistributedSampler(int64_t datasetSize, int rank, int nranks, uint64_t seed, bool shuffle = true);

  std::vector<int64_t> indices(int64_t epoch, int64_t start = 0) const;
  int64_t perRank() const { return size_ / nranks_; }
  // This rank's samples from position `start` of the permutation on.
  int64_t perRankFrom(int64_t start) const;
  // Steps per epoch with `localBatch` samples per step (the last step may be short),
  // counted from position `start`.
  int64_t steps(int64_t localBatch, int64_t start = 0) const;

 private:
  int64_t size_;
  int rank_, nranks_;
  uint64_t seed_;
  bool shuffle_;
};

}  // namespace collective::frontend
