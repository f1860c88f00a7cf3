// Device buffers for the *_perf tools (nccl-tests' -g: data on GPUs), over the CUDA
// runtime only, so the tools keep using nothing but the public C API of libcollective.
// Built only with CUDA (perf/cuda/meson.build: perf_cuda_dep). Every failure throws
// std::runtime_error with the CUDA call and CUDA's message.
#pragma once

#include <cstddef>
#include <string>

namespace perf::cuda {

// A usable CUDA device exists (false without a driver or GPU: the tool should say so
// and exit, not crash).
bool available();
int deviceCount();
// Makes device (localRank % deviceCount()) current for the calling thread and returns
// it: one GPU per rank, as nccl-tests does with -g 1.
int selectDevice(int localRank);
// "GPU 0: NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)" for the tool's header.
std::string describeDevice(int device);

// Device memory on the current device.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return p_; }
  size_t bytes() const { return bytes_; }
  // Synchronous copies from and to host memory (for filling and checking).
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// A non-blocking stream: pass handle() as the collective's collStream_t, and sync()
// after the timed loop (the calls return before the work is done).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* handle() const { return s_; }
  void sync();

 private:
  void* s_ = nullptr;
};

}  // namespace perf::cuda
