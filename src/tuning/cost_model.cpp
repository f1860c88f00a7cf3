#include "tuning/cost_model.hpp"

#include <limits>

#include "algorithms/algorithm.hpp"

namespace coll {

CostModel::CostModel(const JobTopo& job, const CostParams& p)
    : job_(job), layouts_(patterns::JobLayouts::of(job_)), ctx_(job_, p, layouts_) {}

double CostModel::estimate(OpKind kind, const std::string& algo, size_t bytes) const {
  const Algorithm* a = findAlgorithm(kind, algo);
  return a ? a->estimate(ctx_, bytes) : std::numeric_limits<double>::infinity();
}

}  // namespace coll
