// Python.h first, as Python asks.
#include <Python.h>

#include "process_group.hpp"

#include <ATen/core/ivalue.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace collective_c10d {
namespace {

std::string describe(const at::Tensor& t) {
  std::ostringstream os;
  os << t.scalar_type() << t.sizes();
  return os.str();
}

// The library's type for moving a tensor's bytes, or for reducing them.
collDataType_t reduceType(at::ScalarType st, bool* ok) {
  *ok = true;
  switch (st) {
    case at::kFloat: return collFloat32;
    case at::kDouble: return collFloat64;
    case at::kHalf: return collFloat16;
    case at::kBFloat16: return collBfloat16;
    case at::kChar: return collInt8;
    case at::kByte: return collUint8;
    case at::kShort: return collInt16;
    case at::kInt: return collInt32;
    case at::kLong: return collInt64;
    case at::kBool: return collUint8;
    default: *ok = false; return collUint8;
  }
}

// Data movement takes any dtype: its elements move as bytes of the same total size.
struct Moved {
  collDataType_t dt;
  size_t scale;  // library elements per tensor element
};
Moved movedType(const at::Tensor& t) {
  bool ok = false;
  collDataType_t dt = reduceType(t.scalar_type(), &ok);
  if (ok) return {dt, 1};
  return {collUint8, static_cast<size_t>(t.element_size())};
}

void checkCpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "collective backend: ", what, " is an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "collective backend: ", what, " is on ", t.device(),
              "; this backend takes CPU tensors");
  TORCH_CHECK(t.layout() == at::kStrided, "collective backend: ", what, " is not a dense (strided) tensor");
}

void checkOne(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "collective backend: ", op, " takes a list of exactly one tensor, got ", ts.size());
  checkCpu(ts[0], op);
}

void checkRoot(int64_t root, int size, const char* op) {
  TORCH_CHECK(root >= 0 && root < size, "collective backend: ", op, ": root rank ", root, " is out of range [0, ",
              size, ")");
}

void checkLike(const at::Tensor& t, const at::Tensor& ref, const char* op, const char* what) {
  checkCpu(t, what);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "collective backend: ", op, ": ", what, " has dtype ",
              t.scalar_type(), " but the input has ", ref.scalar_type());
  TORCH_CHECK(t.numel() == ref.numel(), "collective backend: ", op, ": ", what, " has ", t.numel(),
              " elements (", describe(t), ") but the input has ", ref.numel(), " (", describe(ref), ")");
}

// A reduction as the library runs it: type, op, and for a pre-multiplied sum the factor.
struct Reduction {
  collDataType_t dt = collFloat32;
  collRedOp_t op = collSum;
  bool preMul = false;
  at::Tensor factor;  // one element of the tensor's dtype (PREMUL_SUM)
};

Reduction reduction(const c10d::ReduceOp& rop, const at::Tensor& t, const char* opName) {
  bool ok = false;
  Reduction r;
  r.dt = reduceType(t.scalar_type(), &ok);
  TORCH_CHECK(ok, "collective backend: ", opName, " cannot reduce dtype ", t.scalar_type(),
              " (float32/64, float16, bfloat16, int8/16/32/64, uint8 and bool can)");
  const bool isFloat = at::isFloatingType(t.scalar_type());
  const bool isBool = t.scalar_type() == at::kBool;
  switch (rop.op_) {
    case c10d::ReduceOp::SUM: r.op = isBool ? collMax : collSum; break;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? collMin : collProd; break;
    case c10d::ReduceOp::MIN: r.op = collMin; break;
    case c10d::ReduceOp::MAX: r.op = collMax; break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "collective backend: ", opName, ": AVG does not take bool tensors");
      r.op = collAvg;
      break;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(!isFloat, "collective backend: ", opName, ": bitwise reductions take integer or bool tensors, not ",
                  t.scalar_type());
      r.op = rop.op_ == c10d::ReduceOp::BAND ? collBand : rop.op_ == c10d::ReduceOp::BOR ? collBor : collBxor;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(!isBool, "collective backend: ", opName, ": PREMUL_SUM does not take bool tensors");
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(rop.supplement_.get());
      TORCH_CHECK(sup, "collective backend: ", opName, ": PREMUL_SUM without its factor");
      at::Tensor f;
      if (!sup->tensor_factors.empty()) {
        TORCH_CHECK(sup->tensor_factors.size() == 1, "collective backend: ", opName,
                    ": PREMUL_SUM takes one factor, got ", sup->tensor_factors.size());
        f = sup->tensor_factors[0].detach().reshape({-1});
        TORCH_CHECK(f.numel() == 1, "collective backend: ", opName, ": the PREMUL_SUM factor must have one element");
        f = f.to(at::kCPU, t.scalar_type()).clone();
      } else {
        f = at::scalar_tensor(sup->double_factor, at::TensorOptions().dtype(t.scalar_type())).reshape({1});
      }
      r.op = collSum;
      r.preMul = true;
      r.factor = f.contiguous();
      break;
    }
    default: TORCH_CHECK(false, "collective backend: ", opName, ": unsupported reduction ", int(rop.op_));
  }
  return r;
}

// A contiguous view of t, or a contiguous copy that is written back after the operation.
struct Staged {
  at::Tensor user;
  at::Tensor buf;
  bool copyBack = false;
};
Staged stageOut(const at::Tensor& t, bool readInput) {
  Staged s{t, t, false};
  if (!t.is_contiguous()) {
    s.buf = readInput ? t.contiguous() : at::empty(t.sizes(), t.options());
    s.copyBack = true;
  }
  return s;
}
void writeBack(Staged& s) {
  if (s.copyBack) s.user.copy_(s.buf);
}

size_t elems(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

// Calls come back to back (a training step's all-reduces, a wait right after the call):
// the thread that would sleep on a condition variable first watches for what it waits for
// for this long, yielding the CPU between looks. Each sleep and wake-up it saves is a
// futex round trip and a context switch, tens of microseconds on a busy machine, more
// than the operation itself at small sizes.
// Lets go of the GIL (if this thread holds it) for the lifetime of the guard: the worker
// may need it to free the tensors of earlier jobs while this thread waits.
class GilRelease {
 public:
  GilRelease() {
    if (Py_IsInitialized() && PyGILState_Check()) saved_ = PyEval_SaveThread();
  }
  ~GilRelease() {
    if (saved_) PyEval_RestoreThread(saved_);
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* saved_ = nullptr;
};

constexpr auto kSpinBeforeSleep = std::chrono::microseconds(50);

template <class Ready>
bool spinUntil(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 15) == 15 && std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
}

}  // namespace

// ---- Work

class CollWork final : public c10d::Work {
 public:
  CollWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::chrono::milliseconds bound)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        bound_(bound),
        future_(c10::make_intrusive<at::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  // On the worker: the operation is over (exception set when it failed). Returns whether
  // a thread is inside wait(), which then marks the future itself: no completion thread
  // need be woken for it.
  bool complete(std::exception_ptr e) {
    finish(e);
    done_.store(true, std::memory_order_seq_cst);
    return waiters_.load(std::memory_order_seq_cst) > 0;
  }
  // Marks the future (running its callbacks, which may wait for other work), once: on a
  // completion thread, or on the thread in wait() if that gets there first.
  void completeFuture() {
    if (futureClaimed_.exchange(true)) return;
    if (exception_) future_->setError(exception_);
    else future_->markCompleted(c10::IValue(outputs_));
  }

  bool wait(std::chrono::milliseconds timeout) override {
    const auto bound = timeout == kNoTimeout ? bound_ : timeout;
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    bool completed = spinUntil([&] { return done_.load(std::memory_order_acquire); });
    if (!completed) {
      std::unique_lock<std::mutex> lock(mutex_);
      completed = cv_.wait_for(lock, bound, [&] { return completed_; });
    }
    // Leaving without having marked the future: the worker, which skipped the completion
    // thread while this thread waited, may have finished in between; then mark it here.
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
    if (!completed) {
      if (done_.load(std::memory_order_seq_cst)) completeFuture();
      throw std::runtime_error("collective backend: " + std::string(c10d::opTypeToString(retrieveOpType())) +
                               " did not complete within " + std::to_string(bound.count()) + " ms");
    }
    completeFuture();  // no handoff to a completion thread where this thread can do it
    if (exception_) std::rethrow_exception(exception_);
    future_->wait();
    return true;
  }
  bool isCompleted() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_;
  }
  bool isSuccess() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ && !exception_;
  }
  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return exception_;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  void synchronize() override {}

 private:
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds bound_;
  c10::intrusive_ptr<at::ivalue::Future> future_;
  std::atomic<bool> futureClaimed_{false};
  std::atomic<bool> done_{false};  // complete() ran
  std::atomic<int> waiters_{0};    // threads inside wait()
};

// ---- completion threads: a future's callbacks (DDP's comm hooks, PowerSGD) may wait for
// later work of the same group, so they never run on the worker, and a callback that
// blocks does not hold up the completion of other futures: a busy pool grows a thread.
namespace {

class Completer {
 public:
  static Completer& instance() {
    static Completer* c = new Completer();  // never destroyed: threads may outlive main's statics
    return *c;
  }
  void post(c10::intrusive_ptr<CollWork> w) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(w));
    if (idle_ == 0 && threads_ < kMaxThreads) {
      ++threads_;
      std::thread([this] { loop(); }).detach();
    }
    cv_.notify_one();
  }

 private:
  static constexpr int kMaxThreads = 64;
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return !queue_.empty(); });
      --idle_;
      auto w = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      try {
        w->completeFuture();
      } catch (...) {
        // A callback's own exception is stored in the future it returned.
      }
      w.reset();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<CollWork>> queue_;
  int threads_ = 0;
  int idle_ = 0;
};

}  // namespace

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
    if (!job.work->complete(e)) Completer::instance().post(job.work);
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

// ---- operations

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::broadcast(std::vector<at::Tensor>& tensors,
                                                                 const c10d::BroadcastOptions& opts) {
  checkOne(tensors, "broadcast");
  checkRoot(opts.rootRank, size_, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "collective backend: broadcast: rootTensor must be 0");
  auto st = std::make_shared<Staged>(stageOut(tensors[0], rank_ == opts.rootRank));
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, tensors, [this, st, root](std::vector<collRequest_t>&) {
    const Moved m = movedType(st->buf);
    void* p = st->buf.data_ptr();
    check(collBroadcast(p, p, elems(st->buf) * m.scale, m.dt, root, comm_, nullptr), "collBroadcast");
    writeBack(*st);
  }, nullptr, st->buf.nbytes());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::allreduce(std::vector<at::Tensor>& tensors,
                                                                 const c10d::AllreduceOptions& opts) {
  checkOne(tensors, "allreduce");
  Reduction red = reduction(opts.reduceOp, tensors[0], "allreduce");
  auto st = std::make_shared<Staged>(stageOut(tensors[0], true));
  return enqueue(c10d::OpType::ALLREDUCE, tensors, [this, st, red](std::vector<collRequest_t>&) {
    void* p = st->buf.data_ptr();
    collRedOp_t op = red.op;
    if (red.preMul)
      check(collRedOpCreatePreMulSum(&op, red.factor.data_ptr(), red.dt, collScalarHostImmediate, comm_),
            "collRedOpCreatePreMulSum");
    collResult_t rc = collAllReduce(p, p, elems(st->buf), red.dt, op, comm_, nullptr);
    if (red.preMul) collRedOpDestroy(op, comm_);
    check(rc, "collAllReduce");
    writeBack(*st);
  }, nullptr, st->buf.nbytes());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "collective backend: allreduce_coalesced needs at least one tensor");
  for (auto& t : tensors) {
    checkCpu(t, "allreduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "collective backend: allreduce_coalesced: all tensors must have one dtype, got ",
                tensors[0].scalar_type(), " and ", t.scalar_type());
  }
  Reduction red = reduction(opts.reduceOp, tensors[0], "allreduce_coalesced");
  std::vector<at::Tensor> flat;
  for (auto& t : tensors) flat.push_back(t.reshape({-1}));
  auto buf = std::make_shared<at::Tensor>(at::cat(flat));
  std::vector<at::Tensor> users = tensors;
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, tensors, [this, buf, red, users](std::vector<collRequest_t>&) {
    void* p = buf->data_ptr();
    collRedOp_t op = red.op;
    if (red.preMul)
      check(collRedOpCreatePreMulSum(&op, red.factor.data_ptr(), red.dt, collScalarHostImmediate, comm_),
            "collRedOpCreatePreMulSum");
    collResult_t rc = collAllReduce(p, p, elems(*buf), red.dt, op, comm_, nullptr);
    if (red.preMul) collRedOpDestroy(op, comm_);
    check(rc, "collAllReduce");
    int64_t off = 0;
    for (const auto& t : users) {
      at::Tensor u = t;
      u.copy_(buf->narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::reduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::ReduceOptions& opts) {
  checkOne(tensors, "reduce");
  checkRoot(opts.rootRank, size_, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "collective backend: reduce: rootTensor must be 0");
  Reduction red = reduction(opts.reduceOp, tensors[0], "reduce");
  auto st = std::make_shared<Staged>(stageOut(tensors[0], true));
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, tensors, [this, st, red, root](std::vector<collRequest_t>&) {
    void* p = st->buf.data_ptr();
    collRedOp_t op = red.op;
    if (red.preMul)
      check(collRedOpCreatePreMulSum(&op, red.factor.data_ptr(), red.dt, collScalarHostImmediate, comm_),
            "collRedOpCreatePreMulSum");
    collResult_t rc = collReduce(p, p, elems(st->buf), red.dt, op, root, comm_, nullptr);
    if (red.preMul) collRedOpDestroy(op, comm_);
    check(rc, "collReduce");
    if (rank_ == root) writeBack(*st);
  }, nullptr, st->buf.nbytes());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions&) {
  checkOne(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "collective backend: allgather takes one output list, got ", outputs.size());
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, "collective backend: allgather: the output list has ",
              outputs[0].size(), " tensors, the group ", size_, " ranks");
  for (auto& o : outputs[0]) checkLike(o, inputs[0], "allgather", "an output tensor");
  at::Tensor in = inputs[0].contiguous();
  auto flat = std::make_shared<at::Tensor>(at::empty({size_ * in.numel()}, in.options()));
  std::vector<at::Tensor> outs = outputs[0];
  return enqueue(c10d::OpType::ALLGATHER, outs, [this, in, flat, outs](std::vector<collRequest_t>&) {
    const Moved m = movedType(in);
    check(collAllGather(in.data_ptr(), flat->data_ptr(), elems(in) * m.scale, m.dt, comm_, nullptr), "collAllGather");
    for (int r = 0; r < size_; ++r) {
      at::Tensor o = outs[r];
      o.copy_(flat->narrow(0, r * in.numel(), in.numel()).view(o.sizes()));
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::AllgatherOptions&) {
  checkCpu(input, "_allgather_base input");
  checkCpu(output, "_allgather_base output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "collective backend: all_gather_into_tensor: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_, "collective backend: all_gather_into_tensor: output has ",
              output.numel(), " elements, it must have world size ", size_, " x input's ", input.numel());
  at::Tensor in = input.contiguous();
  auto st = std::make_shared<Staged>(stageOut(output, false));
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, [this, in, st](std::vector<collRequest_t>&) {
    const Moved m = movedType(in);
    check(collAllGather(in.data_ptr(), st->buf.data_ptr(), elems(in) * m.scale, m.dt, comm_, nullptr),
          "collAllGather");
    writeBack(*st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK(static_cast<int>(outputLists.size()) == size_, "collective backend: allgather_coalesced: ",
              outputLists.size(), " output lists for a group of ", size_, " ranks");
  for (auto& t : inputs) checkCpu(t, "allgather_coalesced input");
  for (auto& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(), "collective backend: allgather_coalesced: an output list has ",
                list.size(), " tensors, the input list ", inputs.size());
    for (size_t i = 0; i < list.size(); ++i) checkLike(list[i], inputs[i], "allgather_coalesced", "an output tensor");
  }
  // One all-gather of the rank's inputs flattened as bytes.
  std::vector<at::Tensor> bytes;
  for (auto& t : inputs) bytes.push_back(t.contiguous().reshape({-1}).view(at::kByte));
  at::Tensor in = bytes.empty() ? at::empty({0}, at::kByte) : at::cat(bytes);
  auto flat = std::make_shared<at::Tensor>(at::empty({size_ * in.numel()}, in.options()));
  std::vector<at::Tensor> outs;
  for (auto& list : outputLists) outs.insert(outs.end(), list.begin(), list.end());
  auto lists = outputLists;
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, outs, [this, in, flat, lists](std::vector<collRequest_t>&) {
    check(collAllGather(in.data_ptr(), flat->data_ptr(), elems(in), collUint8, comm_, nullptr), "collAllGather");
    for (int r = 0; r < size_; ++r) {
      int64_t off = r * in.numel();
      for (const auto& t : lists[r]) {
        const int64_t nb = t.numel() * t.element_size();
        at::Tensor o = t;
        o.copy_(flat->narrow(0, off, nb).view(t.scalar_type()).view(t.sizes()));
        off += nb;
      }
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::GatherOptions& opts) {
  checkOne(inputs, "gather");
  checkRoot(opts.rootRank, size_, "gather");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "collective backend: gather: the root needs one output list of ", size_, " tensors");
    for (auto& o : outputs[0]) checkLike(o, inputs[0], "gather", "an output tensor");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "collective backend: gather: only the root passes output tensors");
  }
  at::Tensor in = inputs[0].contiguous();
  auto flat = std::make_shared<at::Tensor>(rank_ == root ? at::empty({size_ * in.numel()}, in.options()) : at::Tensor());
  return enqueue(c10d::OpType::GATHER, outs, [this, in, flat, outs, root](std::vector<collRequest_t>&) {
    const Moved m = movedType(in);
    void* r = rank_ == root ? flat->data_ptr() : nullptr;
    check(collGather(in.data_ptr(), r, elems(in) * m.scale, m.dt, root, comm_, nullptr), "collGather");
    if (rank_ != root) return;
    for (int k = 0; k < size_; ++k) {
      at::Tensor o = outs[k];
      o.copy_(flat->narrow(0, k * in.numel(), in.numel()).view(o.sizes()));
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::scatter(std::vector<at::Tensor>& outputs,
                                                               std::vector<std::vector<at::Tensor>>& inputs,
                                                               const c10d::ScatterOptions& opts) {
  checkOne(outputs, "scatter");
  checkRoot(opts.rootRank, size_, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor flat;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "collective backend: scatter: the root needs one input list of ", size_, " tensors");
    std::vector<at::Tensor> parts;
    for (auto& t : inputs[0]) {
      checkLike(t, outputs[0], "scatter", "an input tensor");
      parts.push_back(t.reshape({-1}));
    }
    flat = at::cat(parts);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "collective backend: scatter: only the root passes input tensors");
  }
  auto st = std::make_shared<Staged>(stageOut(outputs[0], false));
  return enqueue(c10d::OpType::SCATTER, outputs, [this, flat, st, root](std::vector<collRequest_t>&) {
    const Moved m = movedType(st->buf);
    const void* s = rank_ == root ? flat.data_ptr() : nullptr;
    check(collScatter(s, st->buf.data_ptr(), elems(st->buf) * m.scale, m.dt, root, comm_, nullptr), "collScatter");
    writeBack(*st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                                      const c10d::ReduceScatterOptions& opts) {
  checkOne(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "collective backend: reduce_scatter needs one input list of ", size_, " tensors");
  std::vector<at::Tensor> parts;
  for (auto& t : inputs[0]) {
    checkLike(t, outputs[0], "reduce_scatter", "an input tensor");
    parts.push_back(t.reshape({-1}));
  }
  Reduction red = reduction(opts.reduceOp, outputs[0], "reduce_scatter");
  at::Tensor flat = at::cat(parts);
  auto st = std::make_shared<Staged>(stageOut(outputs[0], false));
  return enqueue(c10d::OpType::REDUCE_SCATTER, outputs, [this, flat, st, red](std::vector<collRequest_t>&) {
    collRedOp_t op = red.op;
    if (red.preMul)
      check(collRedOpCreatePreMulSum(&op, red.factor.data_ptr(), red.dt, collScalarHostImmediate, comm_),
            "collRedOpCreatePreMulSum");
    collResult_t rc = collReduceScatter(flat.data_ptr(), st->buf.data_ptr(), elems(st->buf), red.dt, op, comm_, nullptr);
    if (red.preMul) collRedOpDestroy(op, comm_);
    check(rc, "collReduceScatter");
    writeBack(*st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                            const c10d::ReduceScatterOptions& opts) {
  checkCpu(input, "reduce_scatter_tensor input");
  checkCpu(output, "reduce_scatter_tensor output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "collective backend: reduce_scatter_tensor: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size_, "collective backend: reduce_scatter_tensor: input has ",
              input.numel(), " elements, it must have world size ", size_, " x output's ", output.numel());
  Reduction red = reduction(opts.reduceOp, input, "reduce_scatter_tensor");
  at::Tensor in = input.contiguous();
  auto st = std::make_shared<Staged>(stageOut(output, false));
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, [this, in, st, red](std::vector<collRequest_t>&) {
    collRedOp_t op = red.op;
    if (red.preMul)
      check(collRedOpCreatePreMulSum(&op, red.factor.data_ptr(), red.dt, collScalarHostImmediate, comm_),
            "collRedOpCreatePreMulSum");
    collResult_t rc = collReduceScatter(in.data_ptr(), st->buf.data_ptr(), elems(st->buf), red.dt, op, comm_, nullptr);
    if (red.preMul) collRedOpDestroy(op, comm_);
    check(rc, "collReduceScatter");
    writeBack(*st);
  });
}

namespace {
// Counts and displacements (in library elements) of an all-to-all split along dim 0.
void splitsOf(const at::Tensor& t, const std::vector<int64_t>& splits, int size, size_t scale, const char* side,
              std::vector<size_t>* counts, std::vector<size_t>* displs) {
  counts->assign(size, 0);
  displs->assign(size, 0);
  if (splits.empty()) {
    TORCH_CHECK(t.dim() > 0 ? t.size(0) % size == 0 : t.numel() == 0, "collective backend: alltoall_base: the ",
                side, " tensor's first dimension (", t.dim() > 0 ? t.size(0) : 0,
                ") does not split evenly over ", size, " ranks");
    const size_t per = elems(t) / size * scale;
    for (int p = 0; p < size; ++p) (*counts)[p] = per, (*displs)[p] = per * p;
    return;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "collective backend: alltoall_base: ", side, " split sizes has ",
              splits.size(), " entries for a group of ", size, " ranks");
  TORCH_CHECK(t.dim() > 0, "collective backend: alltoall_base: the ", side, " tensor has no dimension to split");
  int64_t sum = 0;
  for (int64_t s : splits) {
    TORCH_CHECK(s >= 0, "collective backend: alltoall_base: negative ", side, " split size ", s);
    sum += s;
  }
  TORCH_CHECK(sum == t.size(0), "collective backend: alltoall_base: ", side, " split sizes add up to ", sum,
              " but the tensor's first dimension is ", t.size(0));
  const size_t row = (t.size(0) ? elems(t) / t.size(0) : 0) * scale;
  size_t off = 0;
  for (int p = 0; p < size; ++p) {
    (*counts)[p] = static_cast<size_t>(splits[p]) * row;
    (*displs)[p] = off;
    off += (*counts)[p];
  }
}
}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                     std::vector<int64_t>& outputSplits,
                                                                     std::vector<int64_t>& inputSplits,
                                                                     const c10d::AllToAllOptions&) {
  checkCpu(input, "alltoall_base input");
  checkCpu(output, "alltoall_base output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "collective backend: alltoall_base: output dtype ",
              output.scalar_type(), " differs from input dtype ", input.scalar_type());
  const Moved m = movedType(input);
  auto v = std::make_shared<std::vector<std::vector<size_t>>>(4);
  splitsOf(input, inputSplits, size_, m.scale, "input", &(*v)[0], &(*v)[1]);
  splitsOf(output, outputSplits, size_, m.scale, "output", &(*v)[2], &(*v)[3]);
  at::Tensor in = input.contiguous();
  auto st = std::make_shared<Staged>(stageOut(output, false));
  return enqueue(c10d::OpType::ALLTOALL_BASE, {output}, [this, in, st, v, m](std::vector<collRequest_t>&) {
    auto& c = *v;
    check(collAllToAllv(in.data_ptr(), c[0].data(), c[1].data(), st->buf.data_ptr(), c[2].data(), c[3].data(), m.dt,
                        comm_, nullptr),
          "collAllToAllv");
    writeBack(*st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::alltoall(std::vector<at::Tensor>& outputs,
                                                                std::vector<at::Tensor>& inputs,
                                                                const c10d::AllToAllOptions&) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "collective backend: alltoall needs ", size_, " input and output tensors, got ", inputs.size(), " and ",
              outputs.size());
  for (int p = 0; p < size_; ++p) {
    checkCpu(inputs[p], "alltoall input");
    checkCpu(outputs[p], "alltoall output");
    TORCH_CHECK(inputs[p].scalar_type() == inputs[0].scalar_type() && outputs[p].scalar_type() == inputs[0].scalar_type(),
                "collective backend: alltoall: all tensors must have one dtype");
  }
  std::vector<at::Tensor> ins, outsFlat;
  auto v = std::make_shared<std::vector<std::vector<size_t>>>(4, std::vector<size_t>(size_));
  size_t so = 0, ro = 0;
  for (int p = 0; p < size_; ++p) {
    ins.push_back(inputs[p].contiguous().reshape({-1}).view(at::kByte));
    (*v)[0][p] = elems(inputs[p]) * inputs[p].element_size();
    (*v)[1][p] = so;
    so += (*v)[0][p];
    (*v)[2][p] = elems(outputs[p]) * outputs[p].element_size();
    (*v)[3][p] = ro;
    ro += (*v)[2][p];
  }
  at::Tensor in = at::cat(ins);
  auto flat = std::make_shared<at::Tensor>(at::empty({static_cast<int64_t>(ro)}, at::kByte));
  std::vector<at::Tensor> outs = outputs;
  return enqueue(c10d::OpType::ALLTOALL, outs, [this, in, flat, v, outs](std::vector<collRequest_t>&) {
    auto& c = *v;
    check(collAllToAllv(in.data_ptr(), c[0].data(), c[1].data(), flat->data_ptr(), c[2].data(), c[3].data(),
                        collUint8, comm_, nullptr),
          "collAllToAllv");
    for (int p = 0; p < size_; ++p) {
      at::Tensor o = outs[p];
      o.copy_(flat->narrow(0, static_cast<int64_t>(c[3][p]), static_cast<int64_t>(c[2][p]))
                  .view(o.scalar_type())
                  .view(o.sizes()));
    }
  });
}

namespace {
// Each message carries a header ahead of its payload: the tag and the byte count, so that
// a receive that meets another send than the one it was posted for fails with a message
// instead of reading foreign data.
struct P2PHeader {
  int64_t tag;
  int64_t bytes;
};
}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  checkOne(tensors, "send");
  TORCH_CHECK(dst >= 0 && dst < size_, "collective backend: send: destination rank ", dst, " is out of range [0, ",
              size_, ")");
  TORCH_CHECK(dst != rank_, "collective backend: send: rank ", rank_, " cannot send to itself");
  at::Tensor t = tensors[0].contiguous();
  auto hdr = std::make_shared<P2PHeader>(P2PHeader{tag, static_cast<int64_t>(t.numel() * t.element_size())});
  return enqueue(c10d::OpType::SEND, tensors, [this, t, hdr, dst](std::vector<collRequest_t>& reqs) {
    reqs.resize(2, nullptr);
    check(collIsend(hdr.get(), sizeof(P2PHeader), collUint8, dst, comm_, &reqs[0]), "collIsend");
    if (hdr->bytes > 0)
      check(collIsend(t.data_ptr(), static_cast<size_t>(hdr->bytes), collUint8, dst, comm_, &reqs[1]), "collIsend");
  }, [t, hdr] {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  checkOne(tensors, "recv");
  TORCH_CHECK(src >= 0 && src < size_, "collective backend: recv: source rank ", src, " is out of range [0, ", size_,
              ")");
  TORCH_CHECK(src != rank_, "collective backend: recv: rank ", rank_, " cannot receive from itself");
  auto st = std::make_shared<Staged>(stageOut(tensors[0], false));
  auto hdr = std::make_shared<P2PHeader>(P2PHeader{-1, -1});
  const int64_t bytes = st->buf.numel() * st->buf.element_size();
  const int me = rank_;
  return enqueue(c10d::OpType::RECV, tensors, [this, st, hdr, src, bytes](std::vector<collRequest_t>& reqs) {
    reqs.resize(2, nullptr);
    check(collIrecv(hdr.get(), sizeof(P2PHeader), collUint8, src, comm_, &reqs[0]), "collIrecv");
    if (bytes > 0)
      check(collIrecv(st->buf.data_ptr(), static_cast<size_t>(bytes), collUint8, src, comm_, &reqs[1]), "collIrecv");
  }, [st, hdr, src, tag, bytes, me] {
    if (hdr->tag != tag || hdr->bytes != bytes)
      throw std::runtime_error("collective backend: recv on rank " + std::to_string(me) + " from rank " +
                               std::to_string(src) + " with tag " + std::to_string(tag) + " (" + std::to_string(bytes) +
                               " bytes) matched a send with tag " + std::to_string(hdr->tag) + " (" +
                               std::to_string(hdr->bytes) +
                               " bytes): messages between two ranks match in the order they are posted");
    writeBack(*st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false, "collective backend: recv without a source rank is not supported");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollective::barrier(const c10d::BarrierOptions&) {
  return enqueue(c10d::OpType::BARRIER, {}, [this](std::vector<collRequest_t>&) {
    check(collBarrier(comm_), "collBarrier");
  }, nullptr, 0);
}

// ---- monitored barrier
//
// Rank 0 posts a receive from every other rank, which posts its check-in (a send to rank 0)
// and a receive of rank 0's release together. Rank 0 polls the receives until they are
// all in or the timeout has passed, then sends the releases. Each message is a P2PHeader
// whose tag no c10d send can carry (c10d's tags are ints) and whose byte count is the
// barrier's number on this group, so that a barrier meeting a user's send, or another
// barrier, says so. Every wait is bounded by the barrier's timeout (the library's own
// bound, the group's timeout, ends a request sooner where it is the shorter one). A
// failed barrier leaves requests in flight (rank 0's receive from a rank that never came)
// and the ranks out of step: it revokes the communicator, which ends those requests at
// once here and, within a health check, every operation of the group on the other ranks.

namespace {

constexpr int64_t kMonitoredBarrierTag = -(int64_t{1} << 40) - 0x6d62;  // "mb"

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t k = 0; k < ranks.size(); ++k) s += (k ? ", " : "") + std::to_string(ranks[k]);
  return s;
}


}  // namespace

void ProcessGroupCollective::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  TORCH_CHECK(timeout.count() > 0, "collective backend: monitored_barrier: the timeout must be positive, got ",
              opts.timeout.count(), " ms");
  // The library ends every wait after the communicator's timeout (the group's, in whole
  // seconds): a longer one could not be kept, so the barrier waits and reports that.
  const auto commBound = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_.count() / 1000.0)) * 1000);
  timeout = std::min(timeout, commBound);
  int64_t index = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = ++monitoredBarriers_;
  }
  auto work = enqueue(c10d::OpType::BARRIER, {}, [this, timeout, waitAllRanks, index](std::vector<collRequest_t>&) {
    runMonitoredBarrier(timeout, waitAllRanks, index);
  });
  GilRelease released;
  // The worker spends at most twice the timeout here (rank 0: the check-ins, then the
  // releases), after the jobs queued ahead of this one (the usual bound of a Work).
  work->wait(2 * timeout + timeout_ * 3 + std::chrono::milliseconds(10000));
}

void ProcessGroupCollective::runMonitoredBarrier(std::chrono::milliseconds timeout, bool waitAllRanks,
                                                 int64_t index) {
  if (size_ == 1) return;
  using Clock = std::chrono::steady_clock;
  const std::string where = "collective backend: monitored_barrier on rank " + std::to_string(rank_) + ": ";
  const std::string ms = std::to_string(timeout.count()) + " ms";
  const P2PHeader token{kMonitoredBarrierTag, index};
  // Indexed by peer rank: what arrived from it, its request, why it failed ("" if not).
  std::vector<P2PHeader> got(size_, P2PHeader{0, 0});
  std::vector<collRequest_t> reqs;    // rank 0: receives from each rank; others: {check-in, release}
  std::vector<std::string> errors;
  std::vector<collResult_t> codes;
  // Ends the requests still in flight (revoking the communicator) and makes the group
  // unusable here with `msg`, which it throws.
  auto fail = [&](const std::string& msg) {
    collCommRevoke(comm_);
    for (auto& r : reqs)
      if (r) collWait(&r);  // ends at once once revoked; bounded by the library's timeout anyway
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_.empty()) broken_ = msg.substr(std::strlen("collective backend: "));
    }
    throw std::runtime_error(msg);
  };
  // Polls reqs until none is in flight, `stop()` holds or the deadline passes; a request
  // that fails gets the library's reason in errors[k].
  auto poll = [&](Clock::time_point deadline, const std::function<bool()>& stop) {
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      bool inFlight = false;
      for (size_t k = 0; k < reqs.size(); ++k) {
        if (!reqs[k]) continue;
        int done = 0;
        collResult_t rc = collTest(&reqs[k], &done);
        if (rc == collInProgress) {
          inFlight = true;
          continue;
        }
        if (rc != collSuccess && errors[k].empty()) {
          errors[k] = std::string(collGetErrorString(rc)) + ": " + collGetLastError(comm_);
          codes[k] = rc;
        }
        reqs[k] = nullptr;  // done, or collTest itself failed and the request is unusable
      }
      if (!inFlight || stop() || Clock::now() >= deadline) return;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  };
  auto post = [&](collResult_t rc, const char* call, const std::string& what) {
    if (rc != collSuccess)
      fail(where + call + " " + what + " failed: " + collGetErrorString(rc) + ": " + collGetLastError(comm_));
  };
  auto mismatch = [&](int peer) -> std::string {
    const P2PHeader& h = got[peer];
    if (h.tag != kMonitoredBarrierTag)
      return "the message from rank " + std::to_string(peer) + " is a send with tag " + std::to_string(h.tag) +
             " (" + std::to_string(h.bytes) + " bytes), not monitored_barrier's: the ranks' calls differ";
    return "rank " + std::to_string(peer) + " is in monitored_barrier number " + std::to_string(h.bytes) +
           " of this group, this rank in number " + std::to_string(index);
  };
  const auto start = Clock::now();

  if (rank_ != 0) {
    reqs.assign(2, nullptr);
    errors.assign(2, "");
    codes.assign(2, collSuccess);
    post(collIsend(&token, sizeof(P2PHeader), collUint8, 0, comm_, &reqs[0]), "collIsend", "of the check-in to rank 0");
    post(collIrecv(&got[0], sizeof(P2PHeader), collUint8, 0, comm_, &reqs[1]), "collIrecv",
         "of rank 0's release");
    poll(start + timeout, [&] { return !errors[0].empty() || !errors[1].empty(); });
    if (!errors[0].empty()) fail(where + "its check-in with rank 0 failed: " + errors[0]);
    if (!errors[1].empty()) fail(where + "rank 0's release failed: " + errors[1]);
    if (reqs[1] || reqs[0])
      fail(where + "rank 0 did not release it within " + ms +
           " (rank 0 waits for every rank to arrive and names those that did not)");
    if (got[0].tag != kMonitoredBarrierTag || got[0].bytes != index) fail(where + mismatch(0));
    return;
  }

  // Rank 0: the check-ins.
  reqs.assign(size_, nullptr);
  errors.assign(size_, "");
  codes.assign(size_, collSuccess);
  for (int p = 1; p < size_; ++p)
    post(collIrecv(&got[p], sizeof(P2PHeader), collUint8, p, comm_, &reqs[p]), "collIrecv",
         "of rank " + std::to_string(p) + "'s check-in");
  // Without waitAllRanks the first failure (a request that fails) ends the wait.
  poll(start + timeout, [&] {
    if (waitAllRanks) return false;
    for (const auto& e : errors)
      if (!e.empty()) return true;
    return false;
  });
  // Every rank that did not arrive; without waitAllRanks only the first: the lowest rank
  // whose request failed, else the lowest one still missing. A revoke (another rank's
  // barrier failed first) ends every receive still waiting: it is said once, not as the
  // reason of each rank.
  std::vector<int> missing;
  std::string reasons, revoked;
  for (int p = 1; p < size_; ++p) {
    if (!errors[p].empty()) {
      missing.push_back(p);
      if (codes[p] == collRevoked) revoked = "; meanwhile " + errors[p];
      else reasons += "; rank " + std::to_string(p) + ": " + errors[p];
      if (!waitAllRanks) break;
    }
  }
  reasons += revoked;
  for (int p = 1; p < size_ && (waitAllRanks || missing.empty()); ++p) {
    if (!reqs[p]) continue;
    missing.push_back(p);
    if (!waitAllRanks) break;
  }
  std::sort(missing.begin(), missing.end());
  if (!missing.empty()) {
    fail(where + (missing.size() == 1 ? "Rank " : "Ranks ") + rankList(missing) +
         " failed to pass monitoredBarrier in " + ms + reasons);
  }
  for (int p = 1; p < size_; ++p)
    if (got[p].tag != kMonitoredBarrierTag || got[p].bytes != index) fail(where + mismatch(p));
  // The releases.
  for (int p = 1; p < size_; ++p)
    post(collIsend(&token, sizeof(P2PHeader), collUint8, p, comm_, &reqs[p]), "collIsend",
         "of the release to rank " + std::to_string(p));
  poll(Clock::now() + timeout, [] { return false; });
  std::vector<int> unreleased;
  for (int p = 1; p < size_; ++p) {
    if (!reqs[p] && errors[p].empty()) continue;
    unreleased.push_back(p);
    if (!errors[p].empty()) reasons += "; rank " + std::to_string(p) + ": " + errors[p];
  }
  if (!unreleased.empty())
    fail(where + "every rank arrived, but the release of rank" + (unreleased.size() == 1 ? " " : "s ") +
         rankList(unreleased) + " did not complete within " + ms + reasons);
}

}  // namespace collective_c10d
