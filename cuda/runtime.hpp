// The CUDA runtime as the rest of the library sees it: is there a device, is a pointer
// device memory, and CUDA failures as coll::Error. Built only with CUDA (COLL_HAVE_CUDA);
// callers outside cuda/ guard their use with #if COLL_HAVE_CUDA.
//
// "No device" covers every way the runtime can say so (no driver, driver too old, no
// GPU, CUDA_VISIBLE_DEVICES empty): the library then behaves exactly as a build without
// CUDA, and nothing here throws.
#pragma once

#include <string>

#include "base/error.hpp"

namespace coll::cuda {

// At least one usable device. Asked once per process; the answer cannot change while
// the process runs (the runtime fixes the device list at its first call).
bool cudaAvailable();
// Device count, 0 when cudaAvailable() is false.
int deviceCount();

// The PCI bus id ("0000:19:00.0") of the device current in the calling thread, where the
// thread has a CUDA context current, that is, where the application has chosen its
// device (cudaSetDevice makes its primary context current) as NCCL requires before
// creating a communicator. "" where there is no device or no current context: a CPU job
// on a GPU server is then not bound to device 0, which cudaGetDevice reports by default.
std::string currentDeviceBusId();

// True for device and managed memory (both need stream-ordered staging); false for host
// memory (pageable or pinned), null, or when there is no device.
bool isDevicePointer(const void* p);
// The device that owns device/managed memory p (throws for host memory).
int deviceOfPointer(const void* p);

// collUnhandledCudaError with "<call>: <CUDA's error string>". The code is an int so
// that this header needs no CUDA header.
Error cudaFailure(const std::string& call, int code);
[[noreturn]] void throwCudaError(const std::string& call, int code);
// Throws when code is not cudaSuccess. Clears the runtime's last-error slot first, so a
// failure reported here is not reported again by the next launch check.
void cudaCheck(const char* call, int code);

// Makes `device` current for the scope and restores the caller's device afterwards
// (API calls must not change the application's current device).
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int prev_ = -1;
};

}  // namespace coll::cuda

// Checks a CUDA runtime call; the message names the call as written.
#define COLL_CUDA_CHECK(expr) ::coll::cuda::cudaCheck(#expr, static_cast<int>(expr))
