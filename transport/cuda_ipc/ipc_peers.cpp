#include "transport/cuda_ipc/ipc_peers.hpp"

#include <cuda_runtime.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <random>

#include "base/log.hpp"
#include "cuda/runtime.hpp"
#include "transport/cuda_ipc/ipc_host.hpp"
#include "transport/cuda_ipc/ipc_records.hpp"

namespace coll::cuda {

static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes, "IpcScratchRecord::handle");

namespace {

// Names this process's address space among the ranks of one host.
uint64_t processToken() {
  static const uint64_t token = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  }();
  return token;
}

void warnCuda(const char* call, cudaError_t e) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  COLL_WARN("CUDA IPC: %s: %s", call, cudaGetErrorString(e));
}

}  // namespace

IpcPeers::IpcPeers(int device, size_t bytes, int nranks)
    : device_(device),
      bytes_(bytes),
      mapped_(static_cast<size_t>(nranks), nullptr),
      opened_(static_cast<size_t>(nranks), false) {}

std::unique_ptr<IpcPeers> IpcPeers::allocate(int device, size_t bytes, int nranks) {
  std::unique_ptr<IpcPeers> p(new IpcPeers(device, bytes, nranks));
  try {
    DeviceScope scope(device);
    COLL_CUDA_CHECK(cudaMalloc(&p->own_, bytes));
    cudaIpcMemHandle_t h;
    COLL_CUDA_CHECK(cudaIpcGetMemHandle(&h, p->own_));
    p->handle_.assign(reinterpret_cast<unsigned char*>(&h), reinterpret_cast<unsigned char*>(&h) + sizeof h);
  } catch (const Error& e) {
    p->error_ = e.what();
  }
  return p;
}

bool IpcPeers::connect(HostCollectives& host) {
  const int n = host.nranks(), me = host.rank();
  const int device = device_;
  IpcScratchRecord mine;
  mine.rank = me;
  mine.pid = static_cast<int32_t>(getpid());
  mine.process = processToken();
  mine.device = device;
  mine.bytes = bytes_;
  if (error_.empty()) {
    std::memcpy(mine.handle, handle_.data(), sizeof mine.handle);
    mine.address = reinterpret_cast<uintptr_t>(own_);
    mine.ok = 1;
  } else {
    setRecordError(mine, error_);
  }
  std::vector<IpcScratchRecord> all(static_cast<size_t>(n));
  host.allGather(&mine, all.data(), sizeof mine);
  for (int r = 0; r < n; ++r) validateRecord(all[static_cast<size_t>(r)], r);
  const std::string why = firstRecordFailure(all);
  if (!why.empty()) {
    COLL_WARN("CUDA IPC: no device scratch on %s", why.c_str());
    return false;
  }
  bytes_ = agreedScratchBytes(all);
  std::string failure;
  try {
    DeviceScope scope(device);
    for (int r = 0; r < n; ++r) {
      const IpcScratchRecord& rec = all[static_cast<size_t>(r)];
      if (r == me) {
        mapped_[static_cast<size_t>(r)] = static_cast<char*>(own_);
      } else if (rec.process == mine.process) {
        // Same address space: the pointer is valid as it is (unified addressing). Peer
        // access only makes copies between two devices direct; without it the driver
        // stages them, so failing to enable it is not an error.
        if (rec.device != device) {
          int can = 0;
          COLL_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, rec.device));
          if (can) {
            const cudaError_t e = cudaDeviceEnablePeerAccess(rec.device, 0);
            if (e != cudaErrorPeerAccessAlreadyEnabled) warnCuda("cudaDeviceEnablePeerAccess", e);
            (void)cudaGetLastError();
          }
        }
        mapped_[static_cast<size_t>(r)] = reinterpret_cast<char*>(static_cast<uintptr_t>(rec.address));
      } else {
        cudaIpcMemHandle_t h;
        std::memcpy(&h, rec.handle, sizeof h);
        void* ptr = nullptr;
        COLL_CUDA_CHECK(cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess));
        mapped_[static_cast<size_t>(r)] = static_cast<char*>(ptr);
        opened_[static_cast<size_t>(r)] = true;
      }
    }
  } catch (const Error& e) {
    failure = e.what();
    COLL_WARN("CUDA IPC: rank %d cannot map its peers' scratch: %s", me, e.what());
  }
  const int failed = host.firstFailedRank(failure.empty());
  if (failed >= 0) {
    if (failure.empty()) COLL_WARN("CUDA IPC: rank %d cannot map its peers' scratch (see its log)", failed);
    return false;
  }
  COLL_INFO("CUDA IPC: %zu bytes of device scratch per rank on device %d, %d ranks", bytes_, device, n);
  return true;
}

IpcPeers::~IpcPeers() {
  try {
    DeviceScope scope(device_);
    for (size_t r = 0; r < mapped_.size(); ++r)
      if (opened_[r]) warnCuda("cudaIpcCloseMemHandle", cudaIpcCloseMemHandle(mapped_[r]));
    if (own_) warnCuda("cudaFree", cudaFree(own_));
  } catch (const Error& e) {
    COLL_WARN("CUDA IPC: releasing the device scratch: %s", e.what());
  }
}

}  // namespace coll::cuda
