#include "comm/device_ops.hpp"
#include "comm/repro.hpp"

#if COLL_HAVE_CUDA
#include "cuda/op_spec.hpp"
#include "cuda/runtime.hpp"

namespace coll {
namespace {

// The executor, and with it the CUDA IPC engine (null when the communicator cannot use
// IPC: one rank, several hosts, COLL_CUDA_IPC=0).
cuda::StreamExecutor& streamsOf(collComm& c, cuda::IpcEngine** ipc) {
  std::lock_guard<std::mutex> lock(c.streamsMu);
  if (!c.streams) {
    Comm* impl = c.impl.get();
    const cuda::StreamOptions opts = cuda::StreamOptions::fromConfig(impl->config(), impl->timeoutSec());
    c.ipc = cuda::IpcEngine::create(*impl, opts.chunkBytes);
    c.streams = std::make_unique<cuda::StreamExecutor>(
        c.cudaBackend, [impl](const Error& e) { impl->setAsyncError(e.code(), e.what()); }, opts);
    c.streamsMade.store(true, std::memory_order_release);
  }
  *ipc = c.ipc.get();
  return *c.streams;
}

cuda::JobDone finishes(const std::shared_ptr<Request>& req) {
  return [req](collResult_t code, const std::string& msg) { req->finish(code, msg); };
}

// Device buffers among the ranks of one host go device to device over CUDA IPC where
// selection picks the device algorithm (algorithms/device; COLL_ALGO may force the
// host-staged path); the rest is staged through pinned host memory. Both paths start a
// served collective with the same header exchange (ipc_engine.hpp), so the ranks agree on
// the path per op.
void enqueueSpec(collComm& c, const OpArgs& op, const cuda::StreamOpSpec& spec, void* stream,
                 cuda::JobDone done) {
  Comm* impl = c.impl.get();
  cuda::IpcEngine* ipc = nullptr;
  cuda::StreamExecutor& exec = streamsOf(c, &ipc);
  // Reproducible sums run on the host path, which stages them to Comm::run.
  const bool repro = runsReproducibly(op, impl->reproducible());
  if (ipc && !repro && impl->deviceAlgorithm(op.kind) && ipc->wants(op, spec)) {
    ipc->prepare(spec.device);
    exec.enqueueDevice(stream, spec.device,
                       [ipc, op, spec](const cuda::DeviceWork& w) { ipc->run(op, spec, w); }, std::move(done));
    return;
  }
  if (ipc && !cuda::IpcEngine::agreesOn(op.kind)) ipc = nullptr;
  exec.enqueue(stream, spec, [impl, op, ipc](const cuda::HostView& v) {
    if (ipc && v.offset == 0) ipc->agreeStaged(op);  // before the first chunk only
    OpArgs chunk = op;
    chunk.sendbuf = v.send;
    chunk.recvbuf = v.recv;
    chunk.count = v.count;
    impl->run(chunk);
  }, std::move(done));
}

}  // namespace

void attachCuda(collComm& c) {
  if (cuda::cudaAvailable()) c.cudaBackend = cuda::makeCudaBackend();
}

bool onStream(collComm& c, const OpArgs& op, collStream_t stream) {
  return c.cudaBackend && (stream != nullptr || cuda::usesDeviceMemory(*c.cudaBackend, op));
}

void enqueueOnStream(collComm& c, const OpArgs& op, void* stream, cuda::JobDone done) {
  const cuda::StreamOpSpec spec = cuda::describeOp(*c.cudaBackend, op, c.impl->nranks(), c.impl->rank());
  enqueueSpec(c, op, spec, stream, std::move(done));
}

std::shared_ptr<Request> submitDeviceOp(collComm& c, const OpArgs& op) {
  const cuda::StreamOpSpec spec = cuda::describeOp(*c.cudaBackend, op, c.impl->nranks(), c.impl->rank());
  cuda::IpcEngine* ipc = nullptr;
  void* own = streamsOf(c, &ipc).ownStream(spec.device);
  auto req = std::make_shared<Request>(std::vector<OpArgs>{op});
  enqueueSpec(c, op, spec, own, finishes(req));
  return req;
}

void drainStreams(collComm& c) {
  if (!c.streamsMade.load(std::memory_order_acquire)) return;
  cuda::StreamExecutor* exec;
  {
    std::lock_guard<std::mutex> lock(c.streamsMu);
    exec = c.streams.get();
  }
  if (exec && exec->pending() > 0 && !exec->waitIdle(c.impl->timeoutSec()))
    COLL_THROW(collTimeout, "device-buffer collectives issued earlier on this communicator did not "
               "finish within ", c.impl->timeoutSec(), " s (is their stream blocked?)");
}

std::shared_ptr<Request> launchGroup(collComm& c, const std::vector<GroupedOp>& ops) {
  // A group of one is that op on its own: the same path (chunks, CUDA IPC) as on a rank
  // that issues it outside a group.
  if (ops.size() == 1) {
    enqueueOnStream(c, ops[0].op, ops[0].stream);
    return nullptr;
  }
  Comm* impl = c.impl.get();
  void* firstStream = nullptr;
  for (const GroupedOp& g : ops)
    if (g.onStream) {
      firstStream = g.stream;
      break;
    }
  std::vector<OpArgs> batch;
  std::vector<cuda::StreamOpSpec> specs;
  std::vector<void*> streams;
  bool hostOps = false;
  for (const GroupedOp& g : ops) {
    batch.push_back(g.op);
    specs.push_back(cuda::describeOp(*c.cudaBackend, g.op, impl->nranks(), impl->rank()));
    // An op without a stream stages nothing; it joins the unit on a stream already named.
    streams.push_back(g.onStream ? g.stream : firstStream);
    hostOps = hostOps || !g.onStream;
  }
  // Ops with no device buffer take the device of the group's device buffers, not the
  // caller's current device: they stage nothing, so they must not split the unit.
  int device = -1;
  for (const cuda::StreamOpSpec& s : specs)
    if (s.sendOnDevice || s.recvOnDevice) {
      device = s.device;
      break;
    }
  if (device >= 0)
    for (cuda::StreamOpSpec& s : specs)
      if (!s.sendOnDevice && !s.recvOnDevice) s.device = device;
  auto req = hostOps ? std::make_shared<Request>(batch) : nullptr;
  cuda::IpcEngine* ipc = nullptr;
  streamsOf(c, &ipc).enqueueGroup(streams, specs, [impl, batch](const std::vector<cuda::HostView>& v) {
    // Whole ops (a group is not chunked): each op on its staging or its own host memory,
    // all of them in one run so that the group's sends and receives match up.
    std::vector<OpArgs> staged = batch;
    for (size_t p = 0; p < staged.size(); ++p) {
      staged[p].sendbuf = v[p].send;
      staged[p].recvbuf = v[p].recv;
    }
    impl->run(std::move(staged));
  }, req ? finishes(req) : nullptr);
  return req;
}

}  // namespace coll
#endif
