// Each rank's device scratch for the CUDA IPC path, and the mapping of every peer's: the
// ranks export a cudaMalloc'd buffer (cudaIpcGetMemHandle), all-gather the handles
// through the communicator's host collectives and open the others'
// (cudaIpcOpenMemHandle with lazy peer access: NVLink/P2P where the devices can). Ranks
// of one process (threads) share an address space and use the pointer itself; ranks on
// one GPU in different processes open the handle like any other (NCCL refuses several
// ranks per GPU; this path does not need to). CUDA builds only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "transport/cuda_ipc/ipc_host.hpp"

namespace coll::cuda {

class IpcPeers {
 public:
  // Allocates and exports this rank's scratch on `device`. Called on the thread that
  // issues the first IPC op, before any device job of it can hold a stream: a device
  // allocation may wait for work already queued on the device, and that work may be a
  // stream held until a job of this communicator finishes. Never throws: a failure is
  // kept and reported to the peers by connect().
  static std::unique_ptr<IpcPeers> allocate(int device, size_t bytes, int nranks);
  // Collective over the communicator's host collectives, on the executor's worker: every
  // rank calls it with its own.
  // Exchanges the handles and maps the peers' scratch. False on every rank alike when
  // any rank could not allocate, export or map (each logs CUDA's reason); throws only
  // when the host collectives fail.
  bool connect(HostCollectives& host);
  // Closes the peers' mappings and frees the scratch. Every collective ends with the
  // ranks in step after their last read of a peer's scratch, so none is still reading.
  ~IpcPeers();
  IpcPeers(const IpcPeers&) = delete;
  IpcPeers& operator=(const IpcPeers&) = delete;

  int device() const { return device_; }
  // The scratch every rank can use (the smallest offered); valid after connect().
  size_t bytes() const { return bytes_; }
  // Rank r's scratch as this rank addresses it (its own for r == rank).
  char* scratch(int r) const { return mapped_[static_cast<size_t>(r)]; }

 private:
  IpcPeers(int device, size_t bytes, int nranks);
  int device_;
  size_t bytes_;
  void* own_ = nullptr;
  std::vector<unsigned char> handle_;  // exported handle of own_
  std::string error_;                  // why allocate() failed
  std::vector<char*> mapped_;
  std::vector<bool> opened_;  // opened through IPC: closed in the destructor
};

}  // namespace coll::cuda
