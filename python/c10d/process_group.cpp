// The process group: its communicator, its worker thread, and how operations reach it.
#include "pg_internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace collective_c10d {

// ---- the group

ProcessGroupCollective::ProcessGroupCollective(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                               std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size), timeout_(timeout) {
  TORCH_CHECK(store, "collective backend: the store is null");
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "collective backend: rank ", rank, " of ", size);
  TORCH_CHECK(timeout.count() > 0, "collective backend: the timeout must be positive, got ", timeout.count(), " ms");
  const std::string key = "collective_unique_id";
  collUniqueId id;
  if (rank == 0) {
    check(collGetUniqueId(&id), "collGetUniqueId");
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store->set(key, std::vector<uint8_t>(p, p + sizeof(id)));
  } else {
    std::vector<uint8_t> v = store->get(key);
    TORCH_CHECK(v.size() == sizeof(id), "collective backend: the store holds a unique id of ", v.size(),
                " bytes, not ", sizeof(id));
    std::memcpy(&id, v.data(), sizeof(id));
  }
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  const double sec = std::ceil(static_cast<double>(timeout.count()) / 1000.0);
  cfg.timeoutSec = static_cast<int>(std::min(sec, 1e9));
  check(collCommInitRankConfig(&comm_, size, id, rank, &cfg), "collCommInitRankConfig");
  // Every rank has joined, so every rank has read the id: take it out of the store, so
  // that a later group made with the same prefix (init, destroy, init again) cannot meet it.
  if (rank == 0) {
    try {
      store->deleteKey(key);
    } catch (const std::exception&) {
      // A store without deleteKey keeps it: a group made again under the same prefix
      // then needs a fresh store.
    }
  }
  worker_ = std::thread([this] { workerLoop(); });
}

ProcessGroupCollective::~ProcessGroupCollective() {
  // Python drops the last reference with the GIL held, while the worker may be freeing a
  // job's tensors, which takes the GIL when they have a Python object: let go of it until
  // the worker is out and the communicator is down.
  PyThreadState* saved = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) saved = PyEval_SaveThread();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (comm_) {
    collResult_t err = collSuccess;
    collCommGetAsyncError(comm_, &err);
    if (err != collSuccess) collCommAbort(comm_);
    else collCommDestroy(comm_);
  }
  if (saved) PyEval_RestoreThread(saved);
}

at::Tensor ProcessGroupCollective::scratch(const at::Tensor& like, int parts) {
  const int64_t n = like.numel() * parts;
  const int64_t bytes = n * static_cast<int64_t>(like.element_size());
  if (!scratch_.defined() || scratch_.numel() < bytes) scratch_ = at::empty({bytes}, at::kByte);
  return scratch_.narrow(0, 0, bytes).view(like.scalar_type()).view({n});
}

void ProcessGroupCollective::check(collResult_t rc, const char* call) const {
  if (rc == collSuccess) return;
  throw std::runtime_error(std::string("collective backend: ") + call + " failed: " + collGetErrorString(rc) + ": " +
                           collGetLastError(comm_));
}

void ProcessGroupCollective::runInline(CollWork& work, const std::function<void(std::vector<collRequest_t>&)>& run,
                                       const std::function<void()>& after) {
  GilRelease nogil;
  at::NoGradGuard noGrad;
  std::exception_ptr e;
  try {
    std::vector<collRequest_t> reqs;
    run(reqs);  // the collectives that run inline complete within the call
    TORCH_INTERNAL_ASSERT(reqs.empty(), "an inline operation left requests in flight");
    if (after) after();
  } catch (...) {
    e = std::current_exception();
  }
  work.complete(e);
  // The caller does not hold the work yet: no callback is attached and nobody waits, so
  // marking its future here runs nothing else.
  work.completeFuture();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                               std::function<void(std::vector<collRequest_t>&)> run,
                                                               std::function<void()> after, size_t inlineBytes) {
  // The wait bound of Work.wait(): the library fails every operation within twice its
  // timeout; a little more covers the queue ahead of this one.
  const auto bound = timeout_ * 3 + std::chrono::milliseconds(10000);
  auto work = c10::make_intrusive<CollWork>(rank_, type, std::move(outputs), bound);
  {
    std::unique_lock<std::mutex> lock(mu_);
    TORCH_CHECK(!stop_, "collective backend: the process group is being destroyed");
    TORCH_CHECK(broken_.empty(), "collective backend: the process group is unusable after an earlier error: ",
                broken_);
    if (inlineBytes <= kInlineMaxBytes && queue_.empty() && workerIdle_ && !inlineBusy_) {
      // Nothing of this group is queued or in flight: a small collective runs here, in
      // issue order all the same, and spares the hand-off to the worker and back (two
      // wake-ups, most of such a call's time). The worker takes no job meanwhile.
      inlineBusy_ = true;
      ++seq_;
      lock.unlock();
      runInline(*work, run, after);
      lock.lock();
      inlineBusy_ = false;
      const bool queued = !queue_.empty();
      lock.unlock();
      if (queued) cv_.notify_one();
      return work;
    }
    queue_.push_back(Job{std::move(run), std::move(after), work});
    ++seq_;
  }
  posted_.fetch_add(1, std::memory_order_release);
  cv_.notify_one();
  return work;
}

void ProcessGroupCollective::workerLoop() {
  struct Active {
    Job job;
    std::vector<collRequest_t> reqs;
    std::exception_ptr error;
  };
  // Writing results back into the caller's tensors is no autograd operation.
  at::NoGradGuard noGrad;
  std::vector<Active> active;
  uint64_t taken = 0;  // jobs taken from the queue
  auto finishJob = [](Job& job, std::exception_ptr e) {
    if (!e && job.after) {
      try {
        job.after();
      } catch (...) {
        e = std::current_exception();
      }
    }
    if (!job.work->complete(e)) postCompletion(job.work);
  };
  for (;;) {
    Job job;
    bool have = false;
    {
      if (active.empty()) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          workerIdle_ = true;  // from now on a small collective may run on its caller's thread
        }
        const uint64_t seen = taken;
        spinUntil([&] { return posted_.load(std::memory_order_acquire) != seen; });
      }
      std::unique_lock<std::mutex> lock(mu_);
      auto ready = [&] { return stop_ || (!queue_.empty() && !inlineBusy_); };
      if (active.empty()) cv_.wait(lock, ready);
      else cv_.wait_for(lock, std::chrono::microseconds(50), ready);
      if (!queue_.empty() && !inlineBusy_) {
        job = std::move(queue_.front());
        queue_.pop_front();
        ++taken;
        workerIdle_ = false;
        have = true;
      } else if (stop_ && active.empty()) {
        return;
      }
    }
    if (have) {
      std::vector<collRequest_t> reqs;
      std::exception_ptr e;
      try {
        job.run(reqs);
      } catch (...) {
        e = std::current_exception();
      }
      if (reqs.empty() || e) {
        for (auto& r : reqs)
          if (r) collWait(&r);  // posted before the failure: let them end (bounded by the timeout)
        finishJob(job, e);
      } else {
        active.push_back(Active{std::move(job), std::move(reqs), nullptr});
      }
    }
    for (size_t k = 0; k < active.size();) {
      Active& a = active[k];
      bool done = true;
      for (auto& r : a.reqs) {
        if (!r) continue;
        int fin = 0;
        collResult_t rc = collTest(&r, &fin);
        if (rc == collInProgress) {
          done = false;
          continue;
        }
        if (rc != collSuccess && !a.error) {
          try {
            check(rc, "nonblocking send/recv");
          } catch (...) {
            a.error = std::current_exception();
          }
        }
        if (!fin && r) {  // collTest itself failed: the request is unusable
          r = nullptr;
        }
      }
      if (done) {
        finishJob(a.job, a.error);
        active.erase(active.begin() + static_cast<long>(k));
      } else {
        ++k;
      }
    }
  }
}

}  // namespace collective_c10d
