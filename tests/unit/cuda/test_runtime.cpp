// The CUDA runtime wrappers and the launchers' argument checks. These run on every
// machine: without a device they check the "no device" behaviour (false answers, CUDA
// failures as collUnhandledCudaError with CUDA's text); with one, pointer detection.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "cuda/kernels.hpp"
#include "cuda/runtime.hpp"
#include "cuda/stream_backend.hpp"
#include "gpu_util.hpp"

using namespace coll::cuda;

namespace {

collResult_t codeOf(const std::function<void()>& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const coll::Error& e) {
    if (msg) *msg = e.what();
    return e.code();
  }
  return collSuccess;
}

bool hasGpuDeviceNode() { return access("/dev/nvidiactl", F_OK) == 0 || access("/dev/nvidia0", F_OK) == 0; }

}  // namespace

TEST(CudaRuntime, NoDriverMeansNoDevice) {
  if (!hasGpuDeviceNode()) {
    EXPECT_FALSE(cudaAvailable());
    EXPECT_EQ(deviceCount(), 0);
  }
  std::printf("cudaAvailable() = %d, deviceCount() = %d\n", cudaAvailable(), deviceCount());
  // Asked once: the same answer from any thread.
  bool other = !cudaAvailable();
  std::thread([&] { other = cudaAvailable(); }).join();
  EXPECT_EQ(other, cudaAvailable());
}

TEST(CudaRuntime, HostMemoryIsNeverDeviceMemory) {
  int onStack = 0;
  std::vector<char> onHeap(64);
  EXPECT_FALSE(isDevicePointer(nullptr));
  EXPECT_FALSE(isDevicePointer(&onStack));
  EXPECT_FALSE(isDevicePointer(onHeap.data()));
}

TEST(CudaRuntime, ErrorsCarryTheCallAndCudasText) {
  const coll::Error e = cudaFailure("cudaMalloc(&p, 64)", cudaErrorMemoryAllocation);
  EXPECT_EQ(e.code(), collUnhandledCudaError);
  EXPECT_EQ(std::string(e.what()),
            std::string("cudaMalloc(&p, 64): ") + cudaGetErrorString(cudaErrorMemoryAllocation));
  EXPECT_EQ(codeOf([] { cudaCheck("x", cudaSuccess); }), collSuccess);
  std::string msg;
  EXPECT_EQ(codeOf([] { COLL_CUDA_CHECK(cudaErrorInvalidValue); }, &msg), collUnhandledCudaError);
  EXPECT_EQ(msg, std::string("cudaErrorInvalidValue: ") + cudaGetErrorString(cudaErrorInvalidValue));
}

TEST(CudaRuntime, WithoutADeviceCudaCallsFailAsUnhandledCudaError) {
  if (cudaAvailable()) GTEST_SKIP() << "a device is present";
  void* p = nullptr;
  std::string msg;
  EXPECT_EQ(codeOf([&] { COLL_CUDA_CHECK(cudaMalloc(&p, 64)); }, &msg), collUnhandledCudaError);
  EXPECT_EQ(msg.rfind("cudaMalloc(&p, 64): ", 0), 0u) << msg;
  // A launch with valid arguments reaches CUDA, which refuses it.
  EXPECT_EQ(codeOf([] { reduce(reinterpret_cast<void*>(0x1000), reinterpret_cast<void*>(0x2000),
                               reinterpret_cast<void*>(0x3000), 16, collFloat32, collSum, nullptr); }),
            collUnhandledCudaError);
  EXPECT_EQ(codeOf([] { makeCudaBackend(); }), collInvalidArgument);
}

// Argument checks come before any CUDA call, so they hold with or without a device.
TEST(CudaLaunchers, RejectBadArgumentsBeforeLaunching) {
  std::vector<float> h(64);
  void* d = h.data();
  std::string msg;
  EXPECT_EQ(codeOf([&] { reduce(d, d, d, 4, static_cast<collDataType_t>(99), collSum, nullptr); }, &msg),
            collInvalidArgument);
  EXPECT_NE(msg.find("invalid datatype 99"), std::string::npos) << msg;
  EXPECT_EQ(codeOf([&] { reduce(d, d, d, 4, collFloat32, static_cast<collRedOp_t>(99), nullptr); }),
            collInvalidArgument);
  EXPECT_EQ(codeOf([&] { reduce(nullptr, d, d, 4, collFloat32, collSum, nullptr); }), collInvalidArgument);
  EXPECT_EQ(codeOf([&] { reduce(h.data() + 1, h.data(), h.data(), 8, collFloat32, collSum, nullptr); }),
            collInvalidArgument);
  EXPECT_EQ(codeOf([&] { finishAverage(d, 4, collInt32, 0, nullptr); }), collInvalidArgument);
  EXPECT_EQ(codeOf([&] { floatToHalf(nullptr, h.data(), 4, nullptr); }), collInvalidArgument);
  EXPECT_EQ(codeOf([&] { int8Quantize(h.data(), 4, 0, false, 0, nullptr, nullptr); }), collInvalidArgument);
  EXPECT_EQ(codeOf([&] { int8Dequantize(nullptr, 4, 16, h.data(), false, nullptr); }), collInvalidArgument);
  EXPECT_EQ(codeOf([&] { topk(h.data(), 1000, 10, 0, 0, reinterpret_cast<uint32_t*>(d), h.data(), d, 8,
                              nullptr); }, &msg),
            collInvalidArgument);
  EXPECT_NE(msg.find("scratch of 8 bytes"), std::string::npos) << msg;
  CopyDesc bad{nullptr, d, 4};
  EXPECT_EQ(codeOf([&] { batchedCopy(&bad, 1, nullptr); }), collInvalidArgument);
  // Empty work is no work: no CUDA call, no error, with or without a device.
  EXPECT_EQ(codeOf([&] { reduce(nullptr, nullptr, nullptr, 0, collFloat32, collSum, nullptr); }), collSuccess);
  EXPECT_EQ(codeOf([&] { topk(nullptr, 0, 5, 0, 0, nullptr, nullptr, nullptr, 0, nullptr); }), collSuccess);
}

TEST(CudaLaunchers, SizesAreWhatTheFormatsSay) {
  EXPECT_EQ(int8EncodedBytes(1000, 256), 4 * 4 + 1000u);
  EXPECT_EQ(int8EncodedBytes(0, 256), 0u);
  EXPECT_EQ(codeOf([] { int8EncodedBytes(10, 0); }), collInvalidArgument);
  EXPECT_EQ(topkScratchBytes(100, 100), 0u);  // k >= n needs no selection
  EXPECT_GT(topkScratchBytes(25'600'000, 256'000), 256'000 * sizeof(uint32_t));
  EXPECT_LT(topkScratchBytes(25'600'000, 256'000), 25'600'000 * sizeof(uint32_t) / 4);
}

TEST(CudaRuntimeGpu, DetectsDeviceAndPinnedMemory) {
  COLL_REQUIRE_GPU();
  gputest::DeviceMemory dev(256);
  EXPECT_TRUE(isDevicePointer(dev.get()));
  EXPECT_TRUE(isDevicePointer(dev.as<char>() + 100));
  int current = -1;
  COLL_CUDA_CHECK(cudaGetDevice(&current));
  EXPECT_EQ(deviceOfPointer(dev.get()), current);
  void* pinned = nullptr;
  COLL_CUDA_CHECK(cudaMallocHost(&pinned, 256));
  EXPECT_FALSE(isDevicePointer(pinned));
  EXPECT_EQ(codeOf([&] { deviceOfPointer(pinned); }), collInvalidArgument);
  COLL_CUDA_CHECK(cudaFreeHost(pinned));
  void* managed = nullptr;
  COLL_CUDA_CHECK(cudaMallocManaged(&managed, 256));
  EXPECT_TRUE(isDevicePointer(managed));
  COLL_CUDA_CHECK(cudaFree(managed));
}
