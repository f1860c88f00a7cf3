#include "bench_memory.hpp"

#include <cstdint>
#include <cstdlib>
#include <stdexcept>

#include "collective.h"

#if PERF_HAVE_CUDA
#include "device_buffers.hpp"
#endif

namespace perf {
namespace {

// Host memory from aligned_alloc, or (shared) from collMemAlloc, which ranks on this host
// copy into and out of through mappings of their own.
using HostBuffer = std::unique_ptr<char, void (*)(void*)>;

void freeShared(void* p) { collMemFree(p); }

HostBuffer allocHost(size_t bytes, bool shared = false) {
  if (shared) {
    // collMemAlloc wants at least one byte; a sweep of empty messages (-e 0) gets a page.
    void* p = nullptr;
    collResult_t r = collMemAlloc(&p, bytes == 0 ? 1 : bytes);
    if (r != collSuccess) {
      throw std::runtime_error("collMemAlloc(" + std::to_string(bytes) + " bytes) failed: " +
                               collGetErrorString(r) + ": " + collGetLastError(nullptr));
    }
    return HostBuffer(static_cast<char*>(p), freeShared);
  }
  constexpr size_t kAlign = 4096;
  // Rounding a size near SIZE_MAX (-e 18446744073709551615) up would wrap to 0 and hand
  // out one page that the sweep then writes far past.
  if (bytes > SIZE_MAX - (kAlign - 1))
    throw std::runtime_error("cannot allocate " + std::to_string(bytes) + " bytes");
  size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (!p) throw std::runtime_error("cannot allocate " + std::to_string(bytes) + " bytes");
  return HostBuffer(static_cast<char*>(p), std::free);
}

class HostMemory final : public BenchMemory {
 public:
  HostMemory(size_t bytes, bool shared) : send_(allocHost(bytes, shared)), recv_(allocHost(bytes, shared)) {}
  char* send() override { return send_.get(); }
  char* recv() override { return recv_.get(); }
  char* hostSend() override { return send_.get(); }
  char* hostRecv() override { return recv_.get(); }

 private:
  HostBuffer send_, recv_;
};

#if PERF_HAVE_CUDA
class DeviceMemory final : public BenchMemory {
 public:
  explicit DeviceMemory(size_t bytes)
      : hostSend_(allocHost(bytes)), hostRecv_(allocHost(bytes)), send_(bytes), recv_(bytes) {}
  char* send() override { return static_cast<char*>(send_.data()); }
  char* recv() override { return static_cast<char*>(recv_.data()); }
  char* hostSend() override { return hostSend_.get(); }
  char* hostRecv() override { return hostRecv_.get(); }
  // The previous call on the stream may still read or write these buffers.
  void upload(size_t sendBytes, size_t recvBytes) override {
    stream_.sync();
    send_.upload(hostSend_.get(), sendBytes);
    recv_.upload(hostRecv_.get(), recvBytes);
  }
  void download(size_t recvBytes) override {
    stream_.sync();
    recv_.download(hostRecv_.get(), recvBytes);
  }
  void* stream() override { return stream_.handle(); }
  void sync() override { stream_.sync(); }

 private:
  HostBuffer hostSend_, hostRecv_;
  cuda::DeviceBuffer send_, recv_;
  cuda::Stream stream_;
};
#endif

}  // namespace

std::unique_ptr<BenchMemory> makeHostMemory(size_t bytes) { return std::make_unique<HostMemory>(bytes, false); }
std::unique_ptr<BenchMemory> makeSharedMemory(size_t bytes) { return std::make_unique<HostMemory>(bytes, true); }

#if PERF_HAVE_CUDA
std::string deviceBuffersUnavailable() { return cuda::available() ? "" : "no CUDA device"; }
int selectDevice(int localRank) { return cuda::selectDevice(localRank); }
std::string describeDevice(int device) { return cuda::describeDevice(device); }
std::unique_ptr<BenchMemory> makeDeviceMemory(size_t bytes) { return std::make_unique<DeviceMemory>(bytes); }
#else
std::string deviceBuffersUnavailable() { return "built without CUDA"; }
int selectDevice(int) { throw std::runtime_error("built without CUDA"); }
std::string describeDevice(int) { return "cpu"; }
std::unique_ptr<BenchMemory> makeDeviceMemory(size_t) { throw std::runtime_error("built without CUDA"); }
#endif

}  // namespace perf
