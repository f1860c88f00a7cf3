// Helpers for the tests that need a GPU: the skip rule (print "no CUDA device", then
// GTEST_SKIP) and RAII device memory.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "cuda/runtime.hpp"

// Every GPU test starts with this.
#define COLL_REQUIRE_GPU()                        \
  do {                                            \
    if (!::coll::cuda::cudaAvailable()) {         \
      std::printf("no CUDA device\n");            \
      GTEST_SKIP() << "no CUDA device";           \
    }                                             \
  } while (0)

namespace gputest {

// A non-blocking stream of the test's own.
class Stream {
 public:
  Stream() { COLL_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { (void)cudaStreamDestroy(s_); }
  cudaStream_t get() const { return s_; }
  void sync() { COLL_CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};


class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes) : bytes_(bytes) {
    COLL_CUDA_CHECK(cudaMalloc(&p_, bytes ? bytes : 1));
  }
  ~DeviceMemory() {
    if (p_) (void)cudaFree(p_);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* get() const { return p_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }
  template <typename T>
  void upload(const std::vector<T>& v, size_t byteOffset = 0) {
    COLL_CUDA_CHECK(cudaMemcpy(static_cast<char*>(p_) + byteOffset, v.data(), v.size() * sizeof(T),
                               cudaMemcpyHostToDevice));
  }
  template <typename T>
  std::vector<T> download(size_t n, size_t byteOffset = 0) const {
    std::vector<T> v(n);
    COLL_CUDA_CHECK(cudaMemcpy(v.data(), static_cast<const char*>(p_) + byteOffset, n * sizeof(T),
                               cudaMemcpyDeviceToHost));
    return v;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

inline void sync() { COLL_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace gputest
