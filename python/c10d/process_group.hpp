// torch.distributed process group ("collective" backend) over libcollective's C API.
//
// Every operation validates its arguments on the calling thread (a bad argument raises at
// once), then runs on the group's own worker thread in issue order; the returned Work
// completes when it has finished there. Point-to-point operations are posted as the
// library's nonblocking sends and receives, so that a rank's send and receive can be in
// flight together. The library bounds every wait by the group's timeout.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collective.h"

namespace collective_c10d {

class CollWork;

class ProcessGroupCollective final : public c10d::ProcessGroup {
 public:
  // Collective over the group: rank 0 makes the library's unique id and publishes it in
  // `store` (under a key of this group's prefix store), the others read it from there.
  ProcessGroupCollective(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout);
  ~ProcessGroupCollective() override;

  const std::string getBackendName() const override { return "collective"; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  // Blocking. Every other rank checks in with rank 0 and waits for its release; rank 0
  // waits at most opts.timeout (the group's timeout when unset) for the check-ins and
  // raises naming the first rank that did not arrive (waitAllRanks: every such rank).
  // A rank whose barrier fails revokes the communicator (collCommRevoke), so the group is
  // unusable on every rank afterwards, as after any other failure.
  void monitoredBarrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions(), bool waitAllRanks = false) override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }

 private:
  // A job runs on the worker thread. It returns normally when its operation is complete,
  // or hands back requests still in flight (point-to-point) that complete it later.
  struct Pending {
    collRequest_t req = nullptr;
  };
  struct Job {
    std::function<void(std::vector<collRequest_t>&)> run;
    std::function<void()> after;  // on the worker, once all of run's requests completed
    c10::intrusive_ptr<CollWork> work;
  };
  // Queues an operation for the worker. A collective of at most kInlineMaxBytes
  // (inlineBytes: its size; SIZE_MAX: never) runs on the calling thread instead when the
  // group has nothing queued or in flight.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::function<void(std::vector<collRequest_t>&)> run,
                                         std::function<void()> after = nullptr, size_t inlineBytes = SIZE_MAX);
  void runInline(CollWork& work, const std::function<void(std::vector<collRequest_t>&)>& run,
                 const std::function<void()>& after);
  static constexpr size_t kInlineMaxBytes = 64 << 10;
  // An all-gather into a list of this many bytes or more broadcasts into the list's
  // tensors instead of staging (process_group_ops.cpp).
  static constexpr size_t kDirectAllGatherBytes = 1 << 20;
  // A flat tensor of `parts` x like's elements and type, in memory the group keeps for
  // its staged operations: a fresh buffer of megabytes each call costs page faults and
  // zeroing every time. Only jobs running on the worker, or inline (which excludes the
  // worker), call it: one at a time.
  at::Tensor scratch(const at::Tensor& like, int parts);
  at::Tensor scratch_;
  void workerLoop();
  // monitoredBarrier's exchange, on the worker thread; throws when it fails.
  void runMonitoredBarrier(std::chrono::milliseconds timeout, bool waitAllRanks, int64_t index);
  // Throws std::runtime_error carrying the library's explanation when rc fails.
  void check(collResult_t rc, const char* call) const;

  collComm_t comm_ = nullptr;
  std::chrono::milliseconds timeout_;
  uint64_t seq_ = 0;
  int64_t monitoredBarriers_ = 0;  // monitored barriers issued on this group
  std::string broken_;             // why the group is unusable (a failed monitored barrier), or ""
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  // Jobs enqueued so far, readable without mu_: the idle worker watches it for a moment
  // before it sleeps on cv_ (see workerLoop).
  std::atomic<uint64_t> posted_{0};
  bool workerIdle_ = false;  // the worker has no job (under mu_)
  bool inlineBusy_ = false;  // a caller runs a job inline; the worker takes none (under mu_)
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace collective_c10d
