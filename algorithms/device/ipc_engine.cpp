#include "algorithms/device/ipc_engine.hpp"

#include <cuda_runtime.h>

#include <vector>

#include <climits>

#include "base/config.hpp"
#include "base/log.hpp"
#include "cuda/runtime.hpp"
#include "algorithms/device/ipc_collectives.hpp"
#include "transport/cuda_ipc/ipc_peers.hpp"
#include "algorithms/device/ipc_plan.hpp"

namespace coll::cuda {

COLL_PARAM(kCudaIpc, "COLL_CUDA_IPC", "1",
           "device buffers: 0 moves collectives among the ranks of one host through host staging instead of CUDA IPC; set alike on every rank");
COLL_PARAM(kCudaIpcBuffer, "COLL_CUDA_IPC_BUFFER", "32M",
           "device buffers: device scratch per rank for CUDA IPC collectives (the step size follows from it)");

void TeamHostCollectives::allGather(const void* mine, void* all, size_t bytes) {
  OpArgs a;
  a.kind = OpKind::AllGather;
  a.sendbuf = mine;
  a.recvbuf = all;
  a.count = bytes;
  a.dtype = collUint8;
  team_.run(a);
}

int TeamHostCollectives::firstFailedRank(bool ok) {
  int32_t v = ok ? INT32_MAX : team_.rank();
  OpArgs a;
  a.kind = OpKind::AllReduce;
  a.sendbuf = &v;
  a.recvbuf = &v;
  a.count = 1;
  a.dtype = collInt32;
  a.op = collMin;
  team_.run(a);
  return v == INT32_MAX ? -1 : v;
}

std::unique_ptr<IpcEngine> IpcEngine::create(Team& team, size_t stageChunkBytes) {
  const Config& cfg = team.config();
  if (!ipcCommEligible(team.nranks(), team.topology().nhosts(), cfg.getInt(kCudaIpc) != 0)) return nullptr;
  const size_t scratch = cfg.getSize(kCudaIpcBuffer);
  COLL_CHECK_ARG(scratch >= 4096, "COLL_CUDA_IPC_BUFFER=", scratch, " is below 4K");
  return std::unique_ptr<IpcEngine>(new IpcEngine(team, scratch, stageChunkBytes));
}

IpcEngine::IpcEngine(Team& team, size_t scratchBytes, size_t stageChunkBytes)
    : team_(team), host_(team), scratchBytes_(scratchBytes), stageChunkBytes_(stageChunkBytes) {}

IpcEngine::~IpcEngine() = default;

bool IpcEngine::agreesOn(OpKind kind) { return ipcServes(kind); }

// A pre-multiplied sum takes the staged path, where the host scales the input before
// the sum (comm/premul.hpp); the device kernels here know plain reductions only.
bool IpcEngine::wants(const OpArgs& op, const StreamOpSpec& spec) const {
  return ipcServes(op.kind) && !op.preMul && ipcBuffersOnDevice(spec) && !unusable_.load();
}

bool IpcEngine::exchangeHeaders(const OpArgs& op, bool ipc) {
  const IpcOpHeader mine = makeHeader(op, team_.rank(), ipc);
  std::vector<IpcOpHeader> all(static_cast<size_t>(team_.nranks()));
  host_.allGather(&mine, all.data(), sizeof mine);
  return agreeHeaders(all, op);
}

void IpcEngine::agreeStaged(const OpArgs& op) { exchangeHeaders(op, false); }

void IpcEngine::prepare(int device) {
  std::lock_guard<std::mutex> lock(prepareMu_);
  if (!peers_) peers_ = IpcPeers::allocate(device, scratchBytes_, team_.nranks());
}

void IpcEngine::run(const OpArgs& op, const StreamOpSpec& spec, const DeviceWork& work) {
  DeviceScope scope(spec.device);
  // prepare() ran before this job was queued (the queue's lock orders it before us).
  const bool mine = !unusable_.load() && peers_ && peers_->device() == spec.device;
  bool ipc = exchangeHeaders(op, mine);
  // Every rank gets here at the same op: connect() is collective and agrees.
  if (ipc && !connected_.load()) {
    if (peers_->connect(host_)) {
      connected_ = true;
    } else {
      // The scratch stays allocated until the communicator goes: freeing device memory
      // here, with a stream held for this job, could wait for that very stream.
      unusable_ = true;
      ipc = false;
      COLL_WARN("CUDA IPC unusable on this communicator (see above); device buffers go through host memory");
    }
  }
  if (!ipc) {
    runThroughHost(op, spec, work);
    return;
  }
  runIpcCollective(IpcRun{host_, *peers_, work, op, spec});
}

// The host-staged path's work on the worker: the same chunks and host collectives as
// StreamExecutor's staging (planJob with the same chunk size), so that this rank matches
// ranks whose op took that path. Pageable memory: this is the fallback, not the fast path.
void IpcEngine::runThroughHost(const OpArgs& op, const StreamOpSpec& spec, const DeviceWork& work) {
  const JobPlan plan = planJob({spec}, stageChunkBytes_);
  const StagingLayout& layout = plan.layouts[0];
  std::vector<char> block(plan.stagingBytes);
  cudaStream_t stream = static_cast<cudaStream_t>(work.stream);
  for (const ChunkPlan& c : plan.chunks) {
    if (layout.sendStaged()) {
      const ByteRange r = chunkRange(spec, c, spec.sendBytes);
      if (r.bytes)
        COLL_CUDA_CHECK(cudaMemcpyAsync(block.data() + layout.sendOffset + r.offset,
                                        static_cast<const char*>(spec.send) + r.offset, r.bytes,
                                        cudaMemcpyDefault, stream));
      work.sync();
    }
    const HostView v = viewOf(spec, layout, c, block.data());
    OpArgs chunk = op;
    chunk.sendbuf = v.send;
    chunk.recvbuf = v.recv;
    chunk.count = v.count;
    team_.run(chunk);
    if (layout.recvStaged()) {
      const ByteRange r = chunkRange(spec, c, spec.recvBytes);
      if (r.bytes)
        COLL_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(spec.recv) + r.offset,
                                        block.data() + layout.recvOffset + r.offset, r.bytes,
                                        cudaMemcpyDefault, stream));
      work.sync();
    }
  }
}

}  // namespace coll::cuda
