#include "data/sampler.hpp"

#include <algorithm>
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

int64_t DistributedSampler::perRankFrom(int64_t start) const {
  COLL_CHECK_ARG(start >= 0 && start % nranks_ == 0, "DistributedSampler: start ", start,
                 " is not a non-negative multiple of ", nranks_, " ranks");
  return std::max<int64_t>(0, perRank() - start / nranks_);
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch, int64_t start) const {
  const int64_t n = perRankFrom(start);
  std::vector<int64_t> order;
  if (shuffle_) {
    Rng rng = Rng::derive(seed_, static_cast<uint64_t>(epoch));
    order = permutation(size_, rng);
  } else {
    order.resize(static_cast<size_t>(size_));
    std::iota(order.begin(), order.end(), 0);
  }
  std::vector<int64_t> mine(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) mine[i] = order[start + rank_ + i * nranks_];
  return mine;
}

int64_t DistributedSampler::steps(int64_t localBatch, int64_t start) const {
  COLL_CHECK_ARG(localBatch > 0, "DistributedSampler::steps: batch ", localBatch);
  const int64_t n = perRankFrom(start);
  // Not (n + localBatch - 1) / localBatch: that overflows for a huge batch.
  return n / localBatch + (n % localBatch != 0);
}

}  // namespace collective::frontend
