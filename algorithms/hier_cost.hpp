// The hierarchical algorithms' view of the job: the cost of the all-reduce's two variants
// and of the hierarchical all-gather / reduce-scatter, from the host x local-index grid
// (JobLayouts::hier). Built once per job (CostContext::figures), where the all-reduce
// also looks up which variant to run per call.
#pragma once

#include <cstddef>
#include <vector>

#include "cost/context.hpp"

namespace coll {

class HierModel {
 public:
  explicit HierModel(const CostContext& c);
  bool usable() const { return hosts_ >= 2; }
  bool uniform() const { return uniform_; }
  // Intra-host reduce-scatter, one ring per local index across hosts, intra-host all-gather.
  double ringsUs(size_t bytes) const;
  // Reduce to each host's leader, recursive doubling among leaders, broadcast back.
  double leadersUs(size_t bytes) const;
  // What the algorithm runs: the leader variant when hosts differ in size, when
  // COLL_HIER_VARIANT asks for it, or (auto) when it is the cheaper one.
  bool useLeaders(size_t bytes) const {
    if (!uniform_ || p_.hierVariant == CostParams::HierVariant::Leaders) return true;
    return p_.hierVariant == CostParams::HierVariant::Auto && leadersUs(bytes) <= ringsUs(bytes);
  }
  double bestUs(size_t bytes) const { return useLeaders(bytes) ? leadersUs(bytes) : ringsUs(bytes); }
  // The hierarchical all-gather (reduce: reduce-scatter) of one rank's block: a ring per
  // local index across hosts and a ring of columns inside each host, plus the copy
  // between rank order and column order, in segments that overlap the two. Infinity
  // unless hosts are uniform.
  double gatherScatterUs(double blockBytes, bool reduce) const;

 private:
  CostParams p_;
  int hosts_ = 0;
  int local_ = 1;  // largest host
  bool uniform_ = true;
  Hop intra_, inter_, fan_;
  std::vector<Hop> leaderRounds_;
};

}  // namespace coll
