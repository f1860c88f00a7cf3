#include "data/sampler.hpp"

#include <numeric>

#include "base/error.hpp"
#include "rng.hpp"

namespace collective::frontend {

DistributedSampler::DistributedSampler(int64_t datasetSize, int rank, int nranks, uint64_t seed,
                                       bool shuffle)
    : size_(datasetSize), rank_(rank), nranks_(nranks), seed_(seed), shuffle_(shuffle) {
  COLL_CHECK_ARG(nranks > 0 && rank >= 0 && rank < nranks, "DistributedSampler: rank ", rank,
                 " of ", nranks);
  COLL_CHECK_ARG(datasetSize >= 0, "DistributedSampler: dataset size ", datasetSize);
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    Rng rng = Rng::derive(seed_, static_cast<uint64_t>(epoch));
    order = permutation(size_, rng);
  } else {
    order.resize(static_cast<size_t>(size_));
    std::iota(order.begin(), order.end(), 0);
  }
  std::vector<int64_t> mine(static_cast<size_t>(perRank()));
  for (int64_t i = 0; i < perRank(); ++i) mine[i] = order[rank_ + i * nranks_];
  return mine;
}

int64_t DistributedSampler::steps(int64_t localBatch) const {
  COLL_CHECK_ARG(localBatch > 0, "DistributedSampler::steps: batch ", localBatch);
  // Not (perRank() + localBatch - 1) / localBatch: that overflows for a huge batch.
  return perRank() / localBatch + (perRank() % localBatch != 0);
}

}  // namespace collective::frontend
