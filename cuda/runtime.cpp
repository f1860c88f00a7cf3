#include "cuda/runtime.hpp"

#include <cuda_runtime.h>

#include "base/log.hpp"

namespace coll::cuda {
namespace {

int probeDevices() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    COLL_INFO("CUDA: no usable device (%s); only host buffers are accepted", cudaGetErrorString(e));
    return 0;
  }
  COLL_INFO("CUDA: %d device(s)", n);
  return n;
}

}  // namespace

int deviceCount() {
  // Immutable after the first call: the runtime fixes its device list at initialisation.
  static const int count = probeDevices();
  return count;
}

bool cudaAvailable() { return deviceCount() > 0; }

std::string currentDeviceBusId() {
  if (!cudaAvailable()) return "";
  // cuCtxGetCurrent from the driver, reached through the runtime so that the library
  // needs no libcuda at link time. CUresult is an int enum, CUcontext a pointer.
  using CtxGetCurrent = int (*)(void**);
  static const CtxGetCurrent getCurrent = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuCtxGetCurrent", &fn, cudaEnableDefault, &found);
#endif
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      COLL_INFO("CUDA: cuCtxGetCurrent not found (%s); ranks are not bound to a GPU", cudaGetErrorString(e));
      return CtxGetCurrent{nullptr};
    }
    return reinterpret_cast<CtxGetCurrent>(fn);
  }();
  void* ctx = nullptr;
  if (!getCurrent || getCurrent(&ctx) != 0 || !ctx) return "";
  int device = -1;
  char busId[32] = {};
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetPCIBusId(busId, sizeof busId, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return busId;
}

bool isDevicePointer(const void* p) {
  if (!p || !cudaAvailable()) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    // Runtimes before CUDA 11 failed here for ordinary host memory.
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

int deviceOfPointer(const void* p) {
  COLL_CHECK_ARG(p, "deviceOfPointer: null pointer");
  cudaPointerAttributes attr{};
  COLL_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  COLL_CHECK_ARG(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged,
                 "pointer ", p, " is not device memory (cudaPointerAttributes.type = ",
                 static_cast<int>(attr.type), ")");
  return attr.device;
}

Error cudaFailure(const std::string& call, int code) {
  return Error(collUnhandledCudaError,
               strCat(call, ": ", cudaGetErrorString(static_cast<cudaError_t>(code))));
}

void throwCudaError(const std::string& call, int code) { throw cudaFailure(call, code); }

void cudaCheck(const char* call, int code) {
  if (code == cudaSuccess) return;
  (void)cudaGetLastError();
  throwCudaError(call, code);
}

DeviceScope::DeviceScope(int device) {
  COLL_CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != device) COLL_CUDA_CHECK(cudaSetDevice(device));
}

DeviceScope::~DeviceScope() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != prev_ && cudaSetDevice(prev_) != cudaSuccess)
    (void)cudaGetLastError();  // a destructor cannot throw; the caller's device stays changed
}

}  // namespace coll::cuda
