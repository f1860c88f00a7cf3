// What an algorithm prices itself with (Algorithm::estimate): the job, the model's
// parameters, the communicator's layouts, the stage primitive, and figures an algorithm
// derives from the job once (the hops of its stages) and reads on every estimate.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <typeindex>
#include <utility>
#include <vector>

#include "cost/cost.hpp"
#include "topology/job.hpp"
#include "topology/layout.hpp"

namespace coll {

class CostContext {
 public:
  // Keeps references: job and layouts must outlive the context.
  CostContext(const JobTopo& job, const CostParams& p, const patterns::JobLayouts& layouts);
  CostContext(const CostContext&) = delete;
  CostContext& operator=(const CostContext&) = delete;

  const JobTopo& job() const { return job_; }
  const CostParams& params() const { return p_; }
  const patterns::JobLayouts& layouts() const { return lay_; }
  int nranks() const { return job_.nranks(); }
  // The stage made of `flows` running at once: flowsHop with the model's kernel time per
  // inter-host message and the job's kernel groups.
  Hop stage(const std::vector<std::pair<int, int>>& flows) const;
  // The flows of one step of a ring over `order` (every rank to its successor).
  static std::vector<std::pair<int, int>> ringFlows(const std::vector<int>& order);
  double reduceUs(double bytes) const { return bytes / (p_.reduceGBs * 1e3); }
  // Pipeline chunks of `bytes` (at least one).
  size_t chunksOf(double bytes) const;
  // The figures of type T for this job, built as T(*this) on first use and kept with the
  // context (T's constructor may itself ask for other figures). Thread-safe.
  template <typename T>
  const T& figures() const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = figures_.find(typeid(T));
      if (it != figures_.end()) return *static_cast<const T*>(it->second.get());
    }
    auto made = std::make_shared<const T>(*this);  // unlocked: T may ask for figures too
    std::lock_guard<std::mutex> lock(mu_);
    auto it = figures_.emplace(typeid(T), std::move(made)).first;  // a racing build loses
    return *static_cast<const T*>(it->second.get());
  }

 private:
  const JobTopo& job_;
  CostParams p_;
  const patterns::JobLayouts& lay_;
  KernelGroups groups_;
  mutable std::mutex mu_;
  mutable std::map<std::type_index, std::shared_ptr<const void>> figures_;
};

}  // namespace coll
