// The few CUDA runtime services the stream executor needs, behind an interface: the
// CUDA implementation (stream_backend_cuda.cpp, CUDA builds only) and a simulated one in
// the tests, which is how the executor's ordering, pipelining and error paths are
// tested on machines without a GPU.
#pragma once

#include <memory>

namespace coll::cuda {

class StreamBackend {
 public:
  using Event = void*;
  virtual ~StreamBackend() = default;

  // Page-locked host memory: copies from and to it are truly asynchronous.
  virtual void* allocPinned(size_t bytes) = 0;
  // Never throws (reports failures in the log); never called from a host function.
  virtual void freePinned(void* p) noexcept = 0;
  // Rejects a stream the executor cannot serve (one being captured into a graph).
  virtual void checkStream(void* stream, int device) = 0;
  // cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream) with device current.
  virtual void copyAsync(void* dst, const void* src, size_t bytes, void* stream, int device) = 0;
  // A new event recorded on stream now.
  virtual Event recordEvent(void* stream, int device) = 0;
  // Whether everything before the event finished (throws if the GPU reported an error).
  virtual bool eventDone(Event ev) = 0;
  virtual void destroyEvent(Event ev) noexcept = 0;
  // fn(arg) runs when the stream gets there, on a runtime thread; later work on the
  // stream waits for it to return. fn must make no CUDA calls.
  virtual void launchHostFunc(void* stream, void (*fn)(void*), void* arg) = 0;
  // A stream of the executor's own (results go back on it, overlapping the next chunk).
  virtual void* createStream(int device) = 0;
  virtual void destroyStream(void* stream, int device) noexcept = 0;
  // The device that owns device or managed memory p; -1 for host memory (pageable or
  // pinned) and null.
  virtual int deviceOf(const void* p) = 0;
  // The calling thread's current device.
  virtual int currentDevice() = 0;
};

// The CUDA runtime implementation (CUDA builds only).
std::shared_ptr<StreamBackend> makeCudaBackend();

}  // namespace coll::cuda
