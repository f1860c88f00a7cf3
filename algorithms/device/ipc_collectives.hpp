// The collectives of the CUDA IPC path (all-reduce, reduce, reduce-scatter, all-gather,
// broadcast) over the mapped scratch of IpcPeers. CUDA builds only.
#pragma once

#include "base/op.hpp"
#include "cuda/stream_ops.hpp"

#include "transport/cuda_ipc/ipc_host.hpp"

namespace coll::cuda {

class IpcPeers;

struct IpcRun {
  HostCollectives& host;  // the communicator's, to keep the ranks in step
  const IpcPeers& peers;
  const DeviceWork& work;  // the executor's stream on the buffers' device, and its wait
  const OpArgs& op;
  const StreamOpSpec& spec;
};

// Runs the op; every rank of the communicator runs the same op at the same time (the
// header exchange made sure). The current device must be the buffers'.
void runIpcCollective(const IpcRun& run);

}  // namespace coll::cuda
