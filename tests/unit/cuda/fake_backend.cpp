#include "fake_backend.hpp"

#include <cstdlib>
#include <cstring>

#include "base/error.hpp"

namespace fake {

Stream::Stream() : thread_([this] { loop(); }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Stream::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(std::move(fn));
    ++posted_;
  }
  cv_.notify_all();
}

void Stream::closeGate() {
  auto g = std::make_shared<Gate>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    gate_ = g;
  }
  post([g] {
    std::unique_lock<std::mutex> lock(g->mu);
    g->cv.wait_for(lock, std::chrono::seconds(30), [&] { return g->open; });
  });
}

void Stream::openGate() {
  std::shared_ptr<Gate> g;
  {
    std::lock_guard<std::mutex> lock(mu_);
    g = std::move(gate_);
  }
  if (!g) return;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->open = true;
  }
  g->cv.notify_all();
}

bool Stream::sync(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  const size_t target = posted_;
  return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return ran_ >= target; });
}

void Stream::loop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !items_.empty(); });
      if (items_.empty()) return;
      fn = std::move(items_.front());
      items_.pop_front();
    }
    fn();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++ran_;
    }
    cv_.notify_all();
  }
}

Backend::~Backend() {
  // Streams first: their queued items may touch the copy log.
  own_.clear();
}

void* Backend::allocPinned(size_t bytes) {
  ++pinnedLive;
  ++pinnedAllocs;
  return std::malloc(bytes);
}

void Backend::freePinned(void* p) noexcept {
  --pinnedLive;
  std::free(p);
}

void Backend::checkStream(void* stream, int) {
  if (stream && stream == capturingStream)
    COLL_THROW(collInvalidUsage, "stream is being captured (fake)");
}

void Backend::copyAsync(void* dst, const void* src, size_t bytes, void* stream, int) {
  auto delay = copyDelay;
  resolve(stream)->post([this, dst, src, bytes, delay] {
    if (delay.count()) std::this_thread::sleep_for(delay);
    std::memcpy(dst, src, bytes);
    std::lock_guard<std::mutex> lock(mu_);
    copies_.push_back({dst, src, bytes, Clock::now()});
  });
}

coll::cuda::StreamBackend::Event Backend::recordEvent(void* stream, int) {
  auto* ev = new FakeEvent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : own_)
      if (s.get() == stream) ev->onOwnStream = true;
  }
  ++eventsLive;
  resolve(stream)->post([done = ev->done] { done->store(true); });
  return ev;
}

bool Backend::eventDone(Event ev) {
  auto* e = static_cast<FakeEvent*>(ev);
  if (e->onOwnStream && failOwnStreamEvents)
    COLL_THROW(collUnhandledCudaError, "cudaEventQuery: an illegal memory access was encountered (fake)");
  return e->done->load();
}

void Backend::destroyEvent(Event ev) noexcept {
  --eventsLive;
  delete static_cast<FakeEvent*>(ev);
}

void Backend::launchHostFunc(void* stream, void (*fn)(void*), void* arg) {
  if (stream && stream == refuseHostFuncOn)
    COLL_THROW(collUnhandledCudaError, "cudaLaunchHostFunc: operation not permitted (fake)");
  resolve(stream)->post([fn, arg] { fn(arg); });
}

void* Backend::createStream(int) {
  ++streamsLive;
  std::lock_guard<std::mutex> lock(mu_);
  own_.push_back(std::make_unique<Stream>());
  return own_.back().get();
}

void Backend::destroyStream(void*, int) noexcept { --streamsLive; }

int Backend::deviceOf(const void* p) {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(mu_);
  for (const Range& r : device_)
    if (c && c >= r.begin && c < r.begin + r.bytes) return r.device;
  return -1;
}

void Backend::markDevice(const void* p, size_t bytes, int device) {
  std::lock_guard<std::mutex> lock(mu_);
  device_.push_back({static_cast<const char*>(p), bytes, device});
}

void Backend::unmarkDevice(const void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < device_.size(); ++i)
    if (device_[i].begin == p) {
      device_.erase(device_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
}

std::vector<CopyRecord> Backend::copies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return copies_;
}

}  // namespace fake
