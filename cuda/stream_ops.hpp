// Stream-ordered collectives on device buffers (NCCL semantics): the operation starts
// after the work already on the caller's stream, later work on that stream waits for its
// result, and the calling host thread never waits.
//
// Device bytes reach the network through pinned host staging. For one job, enqueue()
// puts on the caller's stream:
//     D2H chunk 0, event 0, D2H chunk 1, event 1, ...,  host function
// and queues the job for the executor's worker thread, which for each chunk in turn
// waits for its event, runs the host collective on the staged chunk, and copies the
// chunk's result back on a stream of its own. The host function (cudaLaunchHostFunc)
// blocks the caller's stream until the worker has finished the job and its copies back
// have completed. So chunk i+1 is copied in while chunk i is on the network and chunk
// i-1 is copied out. Only the host function waits on a CUDA runtime thread, and it
// waits only for the worker, which never waits for a host function: no cycle.
//
// Jobs run in the order they were enqueued, whatever streams they came on; that is the
// communicator's issue order on every rank, which is what keeps ranks matched.
//
// A group job may come on several streams (each part on its own): its copies in go on
// the part's stream, it waits for an event on every stream named, and every one of them
// gets a host function, so each stream waits for the whole group.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/wait.hpp"
#include "base/error.hpp"
#include "cuda/staging_pool.hpp"
#include "cuda/stream_backend.hpp"
#include "cuda/stream_plan.hpp"

namespace coll {
class Config;
}

namespace coll::cuda {

// Runs the host collective of a single op on one chunk.
using HostCollective = std::function<void(const HostView&)>;
// Runs a group's host collectives together (one view per op, whole ops).
using HostGroupCollective = std::function<void(const std::vector<HostView>&)>;
// A job that moves device memory itself instead of staging it (the CUDA IPC path): it
// runs on the worker once the caller's stream has reached it, queues its copies and
// kernels on `stream` (the executor's own non-blocking stream on the job's device) and
// calls sync() to wait for them (the communicator's timeout; abort ends the wait). The
// caller's stream is held until the job returns and its work on `stream` is complete,
// whether the job succeeded or threw.
struct DeviceWork {
  void* stream = nullptr;
  std::function<void()> sync;
};
using DeviceCollective = std::function<void(const DeviceWork&)>;
// Receives every failure of a job (a collective's error, a CUDA error, a timeout); it is
// the communicator's async error. Called on the worker thread or on a CUDA runtime thread.
using ErrorSink = std::function<void(const Error&)>;
// Told once a job is over, its results back in device memory: collSuccess, or the code
// and message of its failure (which the ErrorSink received too). On the worker thread;
// must not enqueue.
using JobDone = std::function<void(collResult_t, const std::string&)>;

struct StreamOptions {
  size_t chunkBytes = size_t{4} << 20;  // pipeline granularity; must match on every rank
  size_t cacheBytes = size_t{1} << 30;  // pinned staging kept for reuse
  double timeoutSec = 300;              // longest wait for a stream or a copy
  int spinCount = 2000;                 // Backoff while polling events
  int maxSleepUs = 200;
  // COLL_CUDA_STAGE_CHUNK, COLL_CUDA_STAGE_CACHE and the wait tunables; the timeout is
  // the communicator's.
  static StreamOptions fromConfig(const Config& cfg, double timeoutSec);
};

class StreamExecutor {
 public:
  StreamExecutor(std::shared_ptr<StreamBackend> backend, ErrorSink onError, StreamOptions opts);
  // Waits up to the timeout for queued jobs, fails those whose stream never got there,
  // then for the host functions still on streams (their staging is leaked if they never
  // run, since it may still be the target of a copy).
  ~StreamExecutor();
  StreamExecutor(const StreamExecutor&) = delete;
  StreamExecutor& operator=(const StreamExecutor&) = delete;

  // Enqueues one op on `stream` and returns. Throws (collInvalidArgument, or
  // collUnhandledCudaError when CUDA refuses the enqueue) before anything is queued, so
  // a throw means the op will not run.
  void enqueue(void* stream, const StreamOpSpec& spec, HostCollective run, JobDone done = nullptr);
  // A group: every op staged, one host call for all of them (chunked only when it is a
  // single element-wise op). Part p is staged on streams[p]; the job waits for the work
  // queued before it on every stream named, and each of them waits for the whole job.
  // All parts must be on one device.
  void enqueueGroup(const std::vector<void*>& streams, const std::vector<StreamOpSpec>& specs,
                    HostGroupCollective run, JobDone done = nullptr);
  void enqueueGroup(void* stream, const std::vector<StreamOpSpec>& specs, HostGroupCollective run) {
    enqueueGroup(std::vector<void*>(specs.size(), stream), specs, std::move(run));
  }
  // A job that works on device memory on `device` itself (see DeviceWork).
  void enqueueDevice(void* stream, int device, DeviceCollective run, JobDone done = nullptr);

  // A stream of the executor's own on `device` (made at the first call), for work that
  // comes with no stream (nonblocking calls): it waits for no application stream.
  void* ownStream(int device);

  // Fails every queued job at once, including those whose stream has not reached them
  // (communicator abort); the destructor then waits only briefly.
  void abort();

  // Jobs enqueued and not finished.
  size_t pending() const;
  // Waits until every job enqueued so far has finished; false on timeout. Host-buffer
  // ops on the same communicator call this first, to stay in issue order.
  bool waitIdle(double timeoutSec);

  PinnedPool& pool() { return *pool_; }

  struct Job;
  struct Shared;

 private:
  void submit(std::vector<void*> streams, std::vector<StreamOpSpec> specs, HostGroupCollective run,
              JobDone done);
  void holdStreams(const std::vector<void*>& streams, const std::shared_ptr<Job>& job);
  void push(std::shared_ptr<Job> job);
  void workerLoop();
  void runJob(Job& job);
  void runChunks(Job& job, size_t& copiesOut);
  void runDevice(Job& job, size_t& copiesOut);
  void finishCopiesOut(Job& job, size_t copiesOut);
  void waitEvent(StreamBackend::Event ev, double timeoutSec, const char* what, bool abortable = true);
  void* copyStream(int device);

  std::shared_ptr<StreamBackend> backend_;
  std::shared_ptr<Shared> shared_;
  StreamOptions opts_;
  YieldGate yields_;  // its event waits' own (base/wait.hpp)
  std::shared_ptr<PinnedPool> pool_;
  std::map<int, void*> copyStreams_;  // worker thread only, until the destructor
  std::mutex ownMu_;
  std::map<int, void*> ownStreams_;  // ownStream(); destroyed last

  mutable std::mutex mu_;
  std::condition_variable cv_;      // work arrived / stopping
  std::condition_variable idleCv_;  // a job finished
  std::deque<std::shared_ptr<Job>> queue_;  // front: running or next
  bool stopping_ = false;
  std::atomic<bool> abandon_{false};  // destructor gave up waiting: fail what is left
  std::thread worker_;
};

}  // namespace coll::cuda
