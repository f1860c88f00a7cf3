// A simulated CUDA runtime for the stream executor: each stream is a thread running its
// items in order, copies are memcpy (optionally slowed down), events are flags set in
// stream order and host functions run on the stream's thread, blocking it, as CUDA's do.
// "Device" memory is ordinary host memory that a test marks as device memory (markDevice),
// so that the library's pointer queries treat it as such. Lets the executor's ordering, pipelining and
// failure handling be tested without a GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda/stream_backend.hpp"

namespace fake {

using Clock = std::chrono::steady_clock;

class Stream {
 public:
  Stream();
  ~Stream();  // runs what is queued, then stops
  void post(std::function<void()> fn);
  // Blocks the stream at this point until open() (stands for earlier GPU work).
  void closeGate();
  void openGate();
  // Waits until everything posted so far ran; false after `seconds`.
  bool sync(double seconds = 10);

 private:
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> items_;
  bool stopping_ = false;
  size_t posted_ = 0, ran_ = 0;
  std::shared_ptr<Gate> gate_;
  std::thread thread_;
};

struct CopyRecord {
  void* dst;
  const void* src;
  size_t bytes;
  Clock::time_point finished;
};

class Backend : public coll::cuda::StreamBackend {
 public:
  ~Backend() override;
  void* allocPinned(size_t bytes) override;
  void freePinned(void* p) noexcept override;
  void checkStream(void* stream, int device) override;
  void copyAsync(void* dst, const void* src, size_t bytes, void* stream, int device) override;
  Event recordEvent(void* stream, int device) override;
  bool eventDone(Event ev) override;
  void destroyEvent(Event ev) noexcept override;
  void launchHostFunc(void* stream, void (*fn)(void*), void* arg) override;
  void* createStream(int device) override;
  void destroyStream(void* stream, int device) noexcept override;
  int deviceOf(const void* p) override;
  int currentDevice() override { return current; }

  // Test knobs and observations.
  std::chrono::milliseconds copyDelay{0};
  void* capturingStream = nullptr;      // checkStream rejects it
  void* refuseHostFuncOn = nullptr;     // launchHostFunc fails on it
  std::atomic<bool> failOwnStreamEvents{false};  // eventDone throws for events on created streams
  std::atomic<int> pinnedLive{0}, pinnedAllocs{0}, eventsLive{0}, streamsLive{0};
  std::vector<CopyRecord> copies() const;
  // [p, p + bytes) counts as memory of `device` from now on.
  void markDevice(const void* p, size_t bytes, int device = 0);
  void unmarkDevice(const void* p);
  std::atomic<int> current{0};
  Stream& defaultStream() { return default_; }

 private:
  struct FakeEvent {
    std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
    bool onOwnStream = false;
  };
  Stream* resolve(void* s) { return s ? static_cast<Stream*>(s) : &default_; }
  mutable std::mutex mu_;
  std::vector<CopyRecord> copies_;
  std::vector<std::unique_ptr<Stream>> own_;
  struct Range {
    const char* begin;
    size_t bytes;
    int device;
  };
  std::vector<Range> device_;
  Stream default_;  // last: destroyed first, while what its items touch still exists
};

}  // namespace fake
