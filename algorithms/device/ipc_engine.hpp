// Device-buffer collectives among the ranks of one host over CUDA IPC, as jobs of the
// communicator's stream executor (StreamExecutor::enqueueDevice): no pinned host staging,
// the data moves device to device. Send/recv and all-to-all, and communicators that span
// hosts, keep the host-staged path of cuda/stream_ops.hpp.
//
// Agreement. Whether an op runs over IPC must be the same on every rank, yet it depends on
// facts of each rank (its buffers are device memory, its scratch could be mapped). So every
// op of a served kind on an eligible communicator starts with a header all-gather on both
// paths, the IPC job and the host-staged one: IPC only when every rank says it can;
// otherwise every rank moves the op through host memory, in the same chunks as the staged
// path, so an IPC job and a staged job still match. A rank that called another
// collective, count, type, op or root is named in a collInvalidUsage error on every rank.
//
// Set-up. The scratch (COLL_CUDA_IPC_BUFFER per rank) is allocated when the first IPC
// op is issued, on the device of its buffers, and the handles are exchanged when the
// first op runs over IPC on every rank; ops on another device later take the host path. When any rank cannot set up (no IPC in a
// container, devices that cannot map each other's memory), every rank falls back to the
// host path for good and logs why.
//
// CUDA builds only; no CUDA header here.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>

#include "base/op.hpp"
#include "cuda/stream_ops.hpp"

#include "algorithms/team.hpp"
#include "transport/cuda_ipc/ipc_host.hpp"

namespace coll::cuda {

class IpcPeers;

// The communicator's host collectives as the CUDA IPC transport wants them.
class TeamHostCollectives final : public HostCollectives {
 public:
  explicit TeamHostCollectives(Team& team) : team_(team) {}
  int rank() const override { return team_.rank(); }
  int nranks() const override { return team_.nranks(); }
  void allGather(const void* mine, void* all, size_t bytes) override;
  int firstFailedRank(bool ok) override;

 private:
  Team& team_;
};

class IpcEngine {
 public:
  // Null unless the communicator may use IPC (ipcCommEligible: several ranks, one host,
  // COLL_CUDA_IPC not 0). stageChunkBytes: the staged path's chunk (StreamOptions), which
  // the host fallback must follow.
  static std::unique_ptr<IpcEngine> create(Team& team, size_t stageChunkBytes);
  ~IpcEngine();
  IpcEngine(const IpcEngine&) = delete;
  IpcEngine& operator=(const IpcEngine&) = delete;

  // At enqueue: whether the op is one for an IPC job (a served kind, every side it uses
  // on the device, and IPC not found unusable).
  bool wants(const OpArgs& op, const StreamOpSpec& spec) const;
  // Whether a host-staged op must exchange the header (its kind is one IPC serves).
  static bool agreesOn(OpKind kind);

  // At enqueue of an IPC job, on the issuing thread: allocates this rank's scratch on
  // the buffers' device the first time (IpcPeers::allocate says why not on the worker).
  void prepare(int device);
  // On the executor's worker: the IPC job (header, set-up, then IPC or the host fallback).
  void run(const OpArgs& op, const StreamOpSpec& spec, const DeviceWork& work);
  // On the executor's worker, before the first chunk of a host-staged op of a served kind.
  void agreeStaged(const OpArgs& op);
  // The scratch is set up and mapped (for logs and tests; IPC ops may still fall back
  // when a rank cannot take part).
  bool connected() const { return connected_.load(); }

 private:
  IpcEngine(Team& team, size_t scratchBytes, size_t stageChunkBytes);
  bool exchangeHeaders(const OpArgs& op, bool ipc);
  void runThroughHost(const OpArgs& op, const StreamOpSpec& spec, const DeviceWork& work);

  Team& team_;
  TeamHostCollectives host_;
  size_t scratchBytes_;
  size_t stageChunkBytes_;
  std::atomic<bool> unusable_{false};  // set-up failed on some rank: host path from now on
  std::atomic<bool> connected_{false};
  // Made by prepare() before the first IPC job is queued, then used by the worker only.
  std::mutex prepareMu_;
  std::unique_ptr<IpcPeers> peers_;
};

}  // namespace coll::cuda
