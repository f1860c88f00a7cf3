// The state behind collective::hvd::Context: the global group, the process sets with their
// engines, the shared timeline and the host layout (local / cross ranks).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collective/hvd.hpp"
#include "base/config.hpp"
#include "engine/engine.hpp"

namespace collective::hvd {

class ContextImpl {
 public:
  // Collective over `global`: exchanges host names to find local and cross ranks.
  ContextImpl(std::unique_ptr<coll::engine::Collectives> global, const coll::Config& cfg);
  ~ContextImpl();
  void shutdown();

  int size() const { return size_; }
  int rank() const { return rank_; }
  int localSize() const { return localSize_; }
  int localRank() const { return localRank_; }
  int crossSize() const { return crossSize_; }
  int crossRank() const { return crossRank_; }

  Handle allreduce(const Tensor& in, const Tensor& out, const std::string& name,
                   const AllreduceOptions& o);
  Handle groupedAllreduce(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                          const std::string& name, const AllreduceOptions& o);
  Handle allgather(const Tensor& in, const std::string& name, const CollectiveOptions& o);
  Handle broadcast(const Tensor& in, const Tensor& out, int root, const std::string& name,
                   const CollectiveOptions& o);
  Handle alltoall(const Tensor& in, const std::vector<int64_t>& splits, const std::string& name,
                  const CollectiveOptions& o);
  Handle reducescatter(const Tensor& in, const std::string& name, const ReducescatterOptions& o);
  void barrier(ProcessSet ps);
  // Local to this rank: the file pattern follows COLL_TIMELINE's rule.
  void startTimeline(const std::string& pattern, bool markCycles);
  void stopTimeline();
  int join(ProcessSet ps);

  ProcessSet addProcessSet(const std::vector<int>& ranks);
  void removeProcessSet(ProcessSet ps);
  std::vector<int> processSetRanks(ProcessSet ps) const;
  int processSetRank(ProcessSet ps) const;
  Stats stats(ProcessSet ps) const;
  // For tests: the stall reports issued by this rank's engine of ps.
  std::vector<std::string> stallReports(ProcessSet ps) const;

 private:
  struct Set {
    std::vector<int> ranks;                        // global ranks, ascending
    // Null when this rank is not a member. Shared: a call that is submitting keeps the
    // engine alive while another thread removes the set or shuts the context down.
    std::shared_ptr<coll::engine::Engine> engine;
  };
  std::shared_ptr<coll::engine::Engine> engineFor(ProcessSet ps, const std::string& what) const;
  const Set& setFor(ProcessSet ps) const;
  std::unique_ptr<coll::engine::Entry> makeEntry(coll::engine::OpType op, const Tensor& in,
                                                 const std::string& name, const char* what);
  std::shared_ptr<detail::HandleState> newHandle(int parts) const;
  int findHostLayout(coll::engine::Collectives& global, bool iFailed);

  coll::engine::EngineParams params_;
  double syncTimeout_ = 0;
  std::unique_ptr<coll::engine::Timeline> timeline_;
  int rank_ = 0, size_ = 1, localRank_ = 0, localSize_ = 1, crossRank_ = 0, crossSize_ = 1;
  mutable std::mutex mu_;
  std::map<int, Set> sets_;
  int nextSetId_ = 1;
  std::atomic<uint64_t> unnamed_{0};
  bool shutDown_ = false;
};

}  // namespace collective::hvd
