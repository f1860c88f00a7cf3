#include "layers/sync_batchnorm.hpp"

#include "comm.hpp"
#include "base/error.hpp"

namespace collective::frontend {

SyncBatchNorm::SyncBatchNorm(std::string name, int64_t channels, collComm_t comm, double eps,
                             double momentum)
    : BatchNorm(std::move(name), channels, eps, momentum), comm_(comm) {
  COLL_CHECK_ARG(comm != nullptr, "SyncBatchNorm ", name_, ": communicator is null");
  nranks_ = commSize(comm);
}

BatchNorm::Moments SyncBatchNorm::batchMoments(const Moments& local) {
  const size_t C = static_cast<size_t>(channels());
  const size_t per = 1 + 2 * C;  // count, means, variances
  std::vector<double> mine(per), all(per * nranks_);
  mine[0] = local.count;
  std::copy(local.mean.begin(), local.mean.end(), mine.begin() + 1);
  std::copy(local.var.begin(), local.var.end(), mine.begin() + 1 + C);
  allGather(mine, all, comm_);

  Moments g;
  g.mean.assign(C, 0.0);
  g.var.assign(C, 0.0);
  for (int r = 0; r < nranks_; ++r) g.count += all[r * per];
  if (g.count <= 0) return g;
  for (int r = 0; r < nranks_; ++r) {
    const double* part = all.data() + r * per;
    const double w = part[0] / g.count;
    for (size_t c = 0; c < C; ++c) g.mean[c] += w * part[1 + c];
  }
  // Within-rank variance plus the spread of the rank means around the global mean.
  for (int r = 0; r < nranks_; ++r) {
    const double* part = all.data() + r * per;
    const double w = part[0] / g.count;
    for (size_t c = 0; c < C; ++c) {
      const double d = part[1 + c] - g.mean[c];
      g.var[c] += w * (part[1 + C + c] + d * d);
    }
  }
  return g;
}

void SyncBatchNorm::reduceGradSums(std::vector<double>& sums) { allReduceSum(sums, comm_); }

}  // namespace collective::frontend
