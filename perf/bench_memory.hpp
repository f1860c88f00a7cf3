// Where a *_perf tool's send and receive buffers live: host memory (the default), with
// -R 1 host memory from collMemAlloc (same-host peers map it and copy directly), or
// with -g 1 device memory on the rank's GPU, called on a non-blocking stream, with host
// mirrors that the data pattern is written to and checked in (upload / download).
// The CUDA half is built only with CUDA (PERF_HAVE_CUDA); without it, and on a machine
// without a device, deviceBuffersUnavailable() says why and nothing else is called.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace perf {

class BenchMemory {
 public:
  virtual ~BenchMemory() = default;
  // What the collective is called with.
  virtual char* send() = 0;
  virtual char* recv() = 0;
  // Where the pattern is written and the result is checked (the same memory for host
  // buffers).
  virtual char* hostSend() = 0;
  virtual char* hostRecv() = 0;
  // Host mirrors -> buffers, and the receive buffer -> its mirror (synchronous).
  virtual void upload(size_t sendBytes, size_t recvBytes) { (void)sendBytes, (void)recvBytes; }
  virtual void download(size_t recvBytes) { (void)recvBytes; }
  // The collective's stream argument (null for host buffers), and a wait for it.
  virtual void* stream() { return nullptr; }
  virtual void sync() {}
};

std::unique_ptr<BenchMemory> makeHostMemory(size_t bytes);
// -R 1: host buffers from collMemAlloc, freed with collMemFree. Throws std::runtime_error
// with the library's message (collGetLastError(NULL)) when collMemAlloc fails.
std::unique_ptr<BenchMemory> makeSharedMemory(size_t bytes);

// Empty when -g 1 can run in this process; otherwise the reason: "built without CUDA"
// or "no CUDA device".
std::string deviceBuffersUnavailable();
// Makes the GPU of this local rank current (local rank modulo the device count) and
// returns it; describeDevice names it for the "# Using devices" header.
int selectDevice(int localRank);
std::string describeDevice(int device);
// Device buffers on the current device (selectDevice first). Throws std::runtime_error
// with CUDA's message.
std::unique_ptr<BenchMemory> makeDeviceMemory(size_t bytes);

}  // namespace perf
