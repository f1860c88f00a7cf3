#include "cost/context.hpp"

#include <algorithm>
#include <cmath>

namespace coll {

CostContext::CostContext(const JobTopo& job, const CostParams& p, const patterns::JobLayouts& layouts)
    : job_(job), p_(p), lay_(layouts), groups_(kernelGroups(job)) {
  groups_.localInKernel = p.localInKernel;
}

Hop CostContext::stage(const std::vector<std::pair<int, int>>& flows) const {
  return flowsHop(job_, flows, p_.netMsgUs, &groups_);
}

std::vector<std::pair<int, int>> CostContext::ringFlows(const std::vector<int>& order) {
  std::vector<std::pair<int, int>> f;
  for (size_t i = 0; order.size() > 1 && i < order.size(); ++i) f.push_back({order[i], order[(i + 1) % order.size()]});
  return f;
}

size_t CostContext::chunksOf(double bytes) const {
  return static_cast<size_t>(std::max(1.0, std::ceil(bytes / p_.chunkBytes)));
}

}  // namespace coll
