#include "device_buffers.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>

namespace perf::cuda {
namespace {

void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(e));
}

}  // namespace

int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

bool available() { return deviceCount() > 0; }

int selectDevice(int localRank) {
  const int n = deviceCount();
  if (n == 0) throw std::runtime_error("no CUDA device");
  const int d = (localRank < 0 ? 0 : localRank) % n;
  check(cudaSetDevice(d), "cudaSetDevice");
  return d;
}

std::string describeDevice(int device) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  char buf[256];
  std::snprintf(buf, sizeof buf, "GPU %d: %s (sm_%d%d, %d SMs, %.1f GiB)", device, p.name, p.major, p.minor,
                p.multiProcessorCount, static_cast<double>(p.totalGlobalMem) / (1 << 30));
  return buf;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  check(cudaMalloc(&p_, bytes ? bytes : 1), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() { (void)cudaFree(p_); }

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  check(cudaMemcpy(static_cast<char*>(p_) + offset, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  check(cudaMemcpy(host, static_cast<const char*>(p_) + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

Stream::Stream() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  s_ = s;
}

Stream::~Stream() { (void)cudaStreamDestroy(static_cast<cudaStream_t>(s_)); }

void Stream::sync() { check(cudaStreamSynchronize(static_cast<cudaStream_t>(s_)), "cudaStreamSynchronize"); }

}  // namespace perf::cuda
