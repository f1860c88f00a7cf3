// What the process group's files share: the Work it hands out, the completion of futures,
// the GIL and spinning helpers, and the header of point-to-point messages.
#pragma once

// Python.h first, as Python asks.
#include <Python.h>

#include <ATen/core/ivalue.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "process_group.hpp"

namespace collective_c10d {

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

// Calls come back to back (a training step's all-reduces, a wait right after the call):
// the thread that would sleep on a condition variable first watches for what it waits for
// for this long, yielding the CPU between looks. Each sleep and wake-up it saves is a
// futex round trip and a context switch, tens of microseconds on a busy machine, more
// than the operation itself at small sizes.
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

// Each message carries a header ahead of its payload: the tag and the byte count, so that
// a receive that meets another send than the one it was posted for fails with a message
// instead of reading foreign data.
struct P2PHeader {
  int64_t tag;
  int64_t bytes;
};

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

// Marks the work's future on a completion thread (its callbacks may wait for later work of
// the same group, so they never run on the worker).
void postCompletion(c10::intrusive_ptr<CollWork> work);

}  // namespace collective_c10d
