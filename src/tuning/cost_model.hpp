// The cost model of one job, as selection (select.cpp), collective-info and the tests use
// it: the job's layouts, the cost context the algorithms price themselves with
// (src/cost), and the estimate of any algorithm by name. Built once per communicator.
#pragma once

#include <cstddef>
#include <string>

#include "algorithms/hier_cost.hpp"
#include "base/op.hpp"
#include "cost/context.hpp"
#include "topology/job.hpp"
#include "topology/layout.hpp"

namespace coll {

class CostModel {
 public:
  CostModel(const JobTopo& job, const CostParams& p);
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;
  // Estimated microseconds for algorithm `algo` of collective `kind` on `bytes` (see
  // Algorithm::estimate); infinity for an algorithm the model does not know or price.
  double estimate(OpKind kind, const std::string& algo, size_t bytes) const;
  const CostParams& params() const { return ctx_.params(); }
  const CostContext& context() const { return ctx_; }
  const patterns::JobLayouts& layouts() const { return layouts_; }
  const patterns::RingLayout& ring() const { return layouts_.ring; }
  const patterns::RingLayout& locality() const { return layouts_.locality; }
  const HierModel& hier() const { return ctx_.figures<HierModel>(); }

 private:
  JobTopo job_;
  patterns::JobLayouts layouts_;
  CostContext ctx_;
};

}  // namespace coll
