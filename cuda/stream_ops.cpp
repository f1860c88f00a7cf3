#include "cuda/stream_ops.hpp"

#include <algorithm>
#include <chrono>

#include "base/config.hpp"
#include "base/log.hpp"
#include "base/wait.hpp"

namespace coll::cuda {

COLL_PARAM(kStageChunk, "COLL_CUDA_STAGE_CHUNK", "4M",
           "device buffers: bytes per pipelined staging chunk of all-reduce/broadcast/reduce/send/recv (0: whole op); must be equal on every rank");
COLL_PARAM(kStageCache, "COLL_CUDA_STAGE_CACHE", "1G", "device buffers: pinned host staging a communicator keeps for reuse");

StreamOptions StreamOptions::fromConfig(const Config& cfg, double timeoutSec) {
  StreamOptions o;
  o.chunkBytes = cfg.getSize(kStageChunk);
  o.cacheBytes = cfg.getSize(kStageCache);
  o.timeoutSec = timeoutSec;
  o.spinCount = static_cast<int>(cfg.getInt("COLL_SPIN_COUNT"));
  o.maxSleepUs = static_cast<int>(cfg.getInt("COLL_WAIT_MAX_SLEEP_US"));
  return o;
}

// State that host functions still on a stream may touch after the executor is gone.
struct StreamExecutor::Shared {
  std::mutex mu;
  std::condition_variable cv;
  ErrorSink sink;
  bool alive = true;
  int hostFns = 0;  // launched and not yet returned

  void report(const Error& e) {
    COLL_WARN("stream-ordered collective failed: %s", e.what());
    std::lock_guard<std::mutex> lock(mu);
    if (alive && sink) sink(e);
  }
  void hostFnStarted() {
    std::lock_guard<std::mutex> lock(mu);
    ++hostFns;
  }
  void hostFnFinished() {
    std::lock_guard<std::mutex> lock(mu);
    --hostFns;
    cv.notify_all();
  }
  bool waitHostFns(double seconds) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return hostFns == 0; });
  }
  void detach() {
    std::lock_guard<std::mutex> lock(mu);
    alive = false;
    sink = nullptr;
  }
};

struct StreamExecutor::Job {
  std::vector<StreamOpSpec> specs;
  HostGroupCollective run;
  DeviceCollective direct;  // set for a device job (no specs, no staging)
  JobDone onDone;
  JobPlan plan;
  int device = 0;
  PinnedPool::Block staging;
  // Per chunk with copies in, one event on each stream the job came on, recorded after
  // that chunk's copies; a single set when nothing is copied in.
  std::vector<std::vector<StreamBackend::Event>> ready;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;       // the worker is finished with it, copies back included
  bool abandoned = false;  // the stream stopped waiting: copy nothing more back

  const std::vector<StreamBackend::Event>& readyFor(size_t c) const {
    return ready.size() == plan.chunks.size() ? ready[c] : ready.back();
  }
  char* block() const { return static_cast<char*>(staging.data()); }
};

namespace {

struct HostFnArg {
  std::shared_ptr<StreamExecutor::Job> job;
  std::shared_ptr<StreamExecutor::Shared> shared;
  double timeoutSec;
};

// Runs on a CUDA runtime thread when the stream gets here; the stream resumes when it
// returns. No CUDA calls: releasing the job only returns staging to the pool's cache.
void streamWaitsForJob(void* p) noexcept {
  std::unique_ptr<HostFnArg> arg(static_cast<HostFnArg*>(p));
  StreamExecutor::Job& job = *arg->job;
  bool finished;
  {
    std::unique_lock<std::mutex> lock(job.mu);
    finished = job.cv.wait_for(lock, std::chrono::duration<double>(arg->timeoutSec),
                               [&] { return job.done; });
    if (!finished) job.abandoned = true;
  }
  if (!finished)
    arg->shared->report(Error(collTimeout, strCat("a stream waited ", arg->timeoutSec,
                                                  " s for its collective; it continues without the result")));
  arg->job.reset();
  arg->shared->hostFnFinished();
}

}  // namespace

StreamExecutor::StreamExecutor(std::shared_ptr<StreamBackend> backend, ErrorSink onError,
                               StreamOptions opts)
    : backend_(std::move(backend)), shared_(std::make_shared<Shared>()), opts_(opts) {
  COLL_CHECK_ARG(backend_, "StreamExecutor: no backend");
  shared_->sink = std::move(onError);
  pool_ = PinnedPool::create(backend_, opts_.cacheBytes);
  worker_ = std::thread([this] { workerLoop(); });
}

StreamExecutor::~StreamExecutor() {
  if (!waitIdle(abandon_ ? 5.0 : opts_.timeoutSec)) {
    COLL_WARN("stream executor: %zu operation(s) still waiting for their streams after %g s; failing them",
              pending(), opts_.timeoutSec);
    abandon_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
  // Jobs whose stream never reached them still have copies into staging queued there.
  if (!shared_->waitHostFns(abandon_ ? 1.0 : opts_.timeoutSec)) {
    COLL_WARN("stream executor: streams have not reached every operation; their pinned staging is leaked");
    new std::shared_ptr<PinnedPool>(pool_);  // deliberately never freed
  }
  shared_->detach();
  for (auto& [device, s] : copyStreams_) backend_->destroyStream(s, device);
  for (auto& [device, s] : ownStreams_) backend_->destroyStream(s, device);
}

// The worker notices at its next chunk or event poll (waits poll with a short backoff).
void StreamExecutor::abort() { abandon_ = true; }

void StreamExecutor::enqueue(void* stream, const StreamOpSpec& spec, HostCollective run, JobDone done) {
  COLL_CHECK_ARG(run, "stream op: no host collective");
  submit({stream}, {spec}, [run = std::move(run)](const std::vector<HostView>& v) { run(v[0]); },
         std::move(done));
}

void StreamExecutor::enqueueGroup(const std::vector<void*>& streams, const std::vector<StreamOpSpec>& specs,
                                  HostGroupCollective run, JobDone done) {
  submit(streams, specs, std::move(run), std::move(done));
}

void StreamExecutor::submit(std::vector<void*> streams, std::vector<StreamOpSpec> specs,
                            HostGroupCollective run, JobDone done) {
  COLL_CHECK_ARG(run, "stream op: no host collective");
  COLL_CHECK_ARG(!specs.empty() && streams.size() == specs.size(), "stream job: ", specs.size(),
                 " op(s) and ", streams.size(), " stream(s)");
  auto job = std::make_shared<Job>();
  job->plan = planJob(specs, opts_.chunkBytes);
  job->device = specs[0].device;
  for (const StreamOpSpec& s : specs)
    COLL_CHECK_ARG(s.device == job->device, "stream group mixes devices ", job->device, " and ", s.device);
  // The streams the job is ordered with, each once, in the order first named.
  std::vector<void*> named;
  for (void* s : streams)
    if (std::find(named.begin(), named.end(), s) == named.end()) named.push_back(s);
  for (void* s : named) backend_->checkStream(s, job->device);
  if (job->plan.stagingBytes) job->staging = pool_->acquire(job->plan.stagingBytes);
  job->specs = std::move(specs);
  job->run = std::move(run);
  job->onDone = std::move(done);
  // Every stream gets an event, even one with nothing to copy in: its earlier work may
  // still use a buffer that this job's results will overwrite.
  auto recordOnEach = [&] {
    job->ready.emplace_back();
    for (void* s : named) job->ready.back().push_back(backend_->recordEvent(s, job->device));
  };
  bool copiesQueued = false;
  try {
    for (const ChunkPlan& c : job->plan.chunks) {
      bool any = false;
      for (size_t p = 0; p < job->specs.size(); ++p) {
        const StreamOpSpec& s = job->specs[p];
        if (!job->plan.layouts[p].sendStaged()) continue;
        const ByteRange r = chunkRange(s, c, s.sendBytes);
        if (r.bytes == 0) continue;
        backend_->copyAsync(job->block() + job->plan.layouts[p].sendOffset + r.offset,
                            static_cast<const char*>(s.send) + r.offset, r.bytes, streams[p], job->device);
        copiesQueued = any = true;
      }
      if (any) recordOnEach();
    }
    if (job->ready.empty()) recordOnEach();
    holdStreams(named, job);
  } catch (...) {
    if (copiesQueued) job->staging.leak();  // a queued copy may still write into it
    for (auto& evs : job->ready)
      for (auto ev : evs) backend_->destroyEvent(ev);
    throw;
  }
  push(std::move(job));
}

void StreamExecutor::enqueueDevice(void* stream, int device, DeviceCollective run, JobDone done) {
  COLL_CHECK_ARG(run, "device job: no collective");
  auto job = std::make_shared<Job>();
  job->device = device;
  job->direct = std::move(run);
  job->onDone = std::move(done);
  backend_->checkStream(stream, device);
  job->ready.push_back({backend_->recordEvent(stream, device)});
  try {
    holdStreams({stream}, job);
  } catch (...) {
    backend_->destroyEvent(job->ready[0][0]);
    throw;
  }
  push(std::move(job));
}

void* StreamExecutor::ownStream(int device) {
  std::lock_guard<std::mutex> lock(ownMu_);
  auto it = ownStreams_.find(device);
  if (it != ownStreams_.end()) return it->second;
  void* s = backend_->createStream(device);
  ownStreams_.emplace(device, s);
  return s;
}

void StreamExecutor::holdStreams(const std::vector<void*>& streams, const std::shared_ptr<Job>& job) {
  size_t held = 0;
  try {
    for (void* stream : streams) {
      auto arg = std::make_unique<HostFnArg>(HostFnArg{job, shared_, 2 * opts_.timeoutSec + 10});
      shared_->hostFnStarted();
      try {
        backend_->launchHostFunc(stream, &streamWaitsForJob, arg.get());
      } catch (...) {
        shared_->hostFnFinished();
        throw;
      }
      arg.release();
      ++held;
    }
  } catch (...) {
    if (held) {
      // The streams already held wait for a job that will never run: let them go.
      {
        std::lock_guard<std::mutex> lock(job->mu);
        job->done = true;
      }
      job->cv.notify_all();
    }
    throw;
  }
}

void StreamExecutor::push(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

size_t StreamExecutor::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

bool StreamExecutor::waitIdle(double timeoutSec) {
  std::unique_lock<std::mutex> lock(mu_);
  return idleCv_.wait_for(lock, std::chrono::duration<double>(timeoutSec), [&] { return queue_.empty(); });
}

void StreamExecutor::workerLoop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      // Idle until work arrives: not a wait for anything that can fail.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = queue_.front();  // stays queued (counted by pending()) until finished
    }
    runJob(*job);
    job.reset();  // before anyone is told it finished: its staging goes back to the pool
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();
    }
    idleCv_.notify_all();
  }
}

void StreamExecutor::runJob(Job& job) {
  size_t copiesOut = 0;
  collResult_t code = collSuccess;
  std::string msg;
  auto fail = [&](const Error& e) {
    if (code != collSuccess) return;  // the first failure is the job's; later ones follow from it
    shared_->report(e);
    code = e.code();
    msg = e.what();
  };
  try {
    if (job.direct) runDevice(job, copiesOut);
    else runChunks(job, copiesOut);
  } catch (const Error& e) {
    fail(e);
  } catch (const std::exception& e) {
    fail(Error(collInternalError, strCat("stream-ordered collective: ", e.what())));
  }
  try {
    finishCopiesOut(job, copiesOut);
  } catch (const Error& e) {
    fail(e);
  }
  for (auto& evs : job.ready)
    for (auto ev : evs) backend_->destroyEvent(ev);
  job.ready.clear();
  {
    std::lock_guard<std::mutex> lock(job.mu);
    job.done = true;
  }
  job.cv.notify_all();
  if (job.onDone) {
    try {
      job.onDone(code, msg);
    } catch (const std::exception& e) {
      COLL_WARN("stream-ordered collective: completion callback failed: %s", e.what());
    }
  }
}

void StreamExecutor::runChunks(Job& job, size_t& copiesOut) {
  const auto& chunks = job.plan.chunks;
  std::vector<HostView> views(job.specs.size());
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (abandon_) COLL_THROW(collInvalidUsage, "communicator aborted or destroyed before this collective ran");
    for (auto ev : job.readyFor(c)) waitEvent(ev, opts_.timeoutSec, "its stream to reach a collective");
    for (size_t p = 0; p < job.specs.size(); ++p)
      views[p] = viewOf(job.specs[p], job.plan.layouts[p], chunks[c], job.staging.data());
    job.run(views);
    for (size_t p = 0; p < job.specs.size(); ++p) {
      const StreamOpSpec& s = job.specs[p];
      if (!job.plan.layouts[p].recvStaged()) continue;
      const ByteRange r = chunkRange(s, chunks[c], s.recvBytes);
      if (r.bytes == 0) continue;
      {
        std::lock_guard<std::mutex> lock(job.mu);
        if (job.abandoned) COLL_THROW(collTimeout, "the stream gave up waiting; results not copied back");
      }
      backend_->copyAsync(static_cast<char*>(s.recv) + r.offset,
                          job.block() + job.plan.layouts[p].recvOffset + r.offset, r.bytes,
                          copyStream(job.device), job.device);
      ++copiesOut;
    }
  }
}

void StreamExecutor::runDevice(Job& job, size_t& copiesOut) {
  if (abandon_) COLL_THROW(collInvalidUsage, "communicator aborted or destroyed before this collective ran");
  waitEvent(job.ready[0][0], opts_.timeoutSec, "its stream to reach a collective");
  DeviceWork work;
  work.stream = copyStream(job.device);
  work.sync = [this, &job, s = work.stream] {
    StreamBackend::Event ev = backend_->recordEvent(s, job.device);
    try {
      waitEvent(ev, opts_.timeoutSec, "device copies of a collective");
    } catch (...) {
      backend_->destroyEvent(ev);
      throw;
    }
    backend_->destroyEvent(ev);
  };
  // Counted before it runs: even when it throws, the stream is released only once the
  // work it queued has completed (finishCopiesOut), never while a copy still writes.
  copiesOut = 1;
  job.direct(work);
}

// Staging may go back to the pool only once no copy out of it is in flight; when that
// cannot be known, the block is leaked and the failure thrown.
void StreamExecutor::finishCopiesOut(Job& job, size_t copiesOut) {
  if (copiesOut == 0) return;
  StreamBackend::Event ev = nullptr;
  try {
    ev = backend_->recordEvent(copyStream(job.device), job.device);
    // Not abortable: the stream must not go on while a result is still being written.
    waitEvent(ev, opts_.timeoutSec, "results to be copied back to the device", false);
  } catch (...) {
    job.staging.leak();
    if (ev) backend_->destroyEvent(ev);
    throw;
  }
  backend_->destroyEvent(ev);
}

void StreamExecutor::waitEvent(StreamBackend::Event ev, double timeoutSec, const char* what,
                               bool abortable) {
  Deadline deadline(timeoutSec);
  Backoff backoff(opts_.spinCount, opts_.maxSleepUs, &yields_);
  while (!backend_->eventDone(ev)) {
    if (abortable && abandon_) COLL_THROW(collInvalidUsage, "communicator destroyed while waiting for ", what);
    if (deadline.expired()) COLL_THROW(collTimeout, "waited ", timeoutSec, " s for ", what);
    backoff.idle();
  }
}

// Non-blocking: a blocking stream would wait for the legacy default stream, which may be
// the caller's stream, held by the host function until these very copies complete.
void* StreamExecutor::copyStream(int device) {
  auto it = copyStreams_.find(device);
  if (it != copyStreams_.end()) return it->second;
  void* s = backend_->createStream(device);
  copyStreams_.emplace(device, s);
  return s;
}

}  // namespace coll::cuda
