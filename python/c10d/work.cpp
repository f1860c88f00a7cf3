// Completion threads for the futures of the process group's work.
#include "pg_internal.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>

namespace collective_c10d {

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

void postCompletion(c10::intrusive_ptr<CollWork> work) { Completer::instance().post(std::move(work)); }

}  // namespace collective_c10d
