// The CUDA runtime behind StreamBackend.
#include <cuda_runtime.h>

#include "base/log.hpp"
#include "cuda/runtime.hpp"
#include "cuda/stream_backend.hpp"

namespace coll::cuda {
namespace {

cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }

class CudaBackend final : public StreamBackend {
 public:
  void* allocPinned(size_t bytes) override {
    void* p = nullptr;
    // Portable: the block may serve streams of any device.
    COLL_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    return p;
  }

  void freePinned(void* p) noexcept override {
    const cudaError_t e = cudaFreeHost(p);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      COLL_WARN("cudaFreeHost(%p): %s", p, cudaGetErrorString(e));
    }
  }

  void checkStream(void* stream, int device) override {
    DeviceScope scope(device);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    COLL_CUDA_CHECK(cudaStreamIsCapturing(asStream(stream), &status));
    // A captured stream records work instead of running it: the worker would wait
    // forever for an event that is only a graph node.
    if (status != cudaStreamCaptureStatusNone)
      COLL_THROW(collInvalidUsage, "stream ", stream, " is being captured into a CUDA graph; "
                 "collectives on host-staged device buffers cannot be captured");
  }

  void copyAsync(void* dst, const void* src, size_t bytes, void* stream, int device) override {
    DeviceScope scope(device);
    COLL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, asStream(stream)));
  }

  Event recordEvent(void* stream, int device) override {
    DeviceScope scope(device);
    cudaEvent_t ev = nullptr;
    COLL_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    const cudaError_t e = cudaEventRecord(ev, asStream(stream));
    if (e != cudaSuccess) {
      (void)cudaEventDestroy(ev);
      throwCudaError("cudaEventRecord", e);
    }
    return ev;
  }

  bool eventDone(Event ev) override {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(ev));
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) return false;
    cudaCheck("cudaEventQuery", e);
    return false;
  }

  void destroyEvent(Event ev) noexcept override {
    if (cudaEventDestroy(static_cast<cudaEvent_t>(ev)) != cudaSuccess) (void)cudaGetLastError();
  }

  void launchHostFunc(void* stream, void (*fn)(void*), void* arg) override {
    COLL_CUDA_CHECK(cudaLaunchHostFunc(asStream(stream), fn, arg));
  }

  void* createStream(int device) override {
    DeviceScope scope(device);
    cudaStream_t s = nullptr;
    COLL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }

  void destroyStream(void* stream, int device) noexcept override {
    try {
      DeviceScope scope(device);
      if (cudaStreamDestroy(asStream(stream)) != cudaSuccess) (void)cudaGetLastError();
    } catch (const Error& e) {
      COLL_WARN("destroying a copy stream: %s", e.what());
    }
  }

  int deviceOf(const void* p) override { return isDevicePointer(p) ? deviceOfPointer(p) : -1; }

  int currentDevice() override {
    int device = 0;
    COLL_CUDA_CHECK(cudaGetDevice(&device));
    return device;
  }
};

}  // namespace

std::shared_ptr<StreamBackend> makeCudaBackend() {
  COLL_CHECK_ARG(cudaAvailable(), "device buffers need a CUDA device, and there is none");
  return std::make_shared<CudaBackend>();
}

}  // namespace coll::cuda
