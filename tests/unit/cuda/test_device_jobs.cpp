// Device jobs of the stream executor (the CUDA IPC path's entry) over the simulated CUDA
// runtime: they start only when the caller's stream gets there, hold that stream until
// their own queued work is complete (also when they fail), keep the issue order with
// staged jobs, and fail instead of hanging on abort and timeouts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "cuda/stream_ops.hpp"
#include "executor_harness.hpp"
#include "fake_backend.hpp"

using namespace coll::cuda;
using namespace std::chrono_literals;

namespace {

// Whole-op jobs (no chunking); the argument is the timeout.
struct Harness : coll::cuda::testing::ExecutorHarness {
  explicit Harness(double timeout = 10) : ExecutorHarness(0, timeout) {}
};

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

}  // namespace

TEST(StreamDeviceJob, RunsWhenTheStreamGetsThereAndHoldsItUntilDone) {
  Harness h;
  fake::Stream stream;
  std::vector<float> src = iota(64), dst(64, 0.0f), seenByLaterWork;
  std::atomic<bool> ran{false};
  void* workStream = nullptr;
  stream.closeGate();
  const auto t0 = std::chrono::steady_clock::now();
  h.exec->enqueueDevice(&stream, 0, [&](const DeviceWork& w) {
    ran = true;
    workStream = w.stream;
    h.backend->copyAsync(dst.data(), src.data(), 64 * sizeof(float), w.stream, 0);
    w.sync();
    EXPECT_EQ(dst[63], 64.0f) << "sync returned before the copy completed";
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 200ms) << "enqueue waited";
  stream.post([&] { seenByLaterWork = dst; });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(ran.load()) << "ran before earlier work on the stream finished";
  stream.openGate();
  ASSERT_TRUE(stream.sync());
  EXPECT_TRUE(ran.load());
  EXPECT_NE(workStream, nullptr);
  EXPECT_NE(workStream, &stream) << "the job must work on the executor's own stream";
  EXPECT_EQ(seenByLaterWork, src);
  EXPECT_TRUE(h.exec->waitIdle(5));
  EXPECT_TRUE(h.errorsSeen().empty());
  EXPECT_EQ(h.backend->eventsLive.load(), 0);
}

TEST(StreamDeviceJob, KeepsIssueOrderWithStagedJobs) {
  Harness h;
  fake::Stream a, b;
  std::vector<float> s = iota(8), r(8);
  std::mutex mu;
  std::vector<int> order;
  a.closeGate();
  h.exec->enqueueDevice(&a, 0, [&](const DeviceWork&) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(1);
  });
  StreamOpSpec spec;
  spec.send = s.data();
  spec.sendBytes = spec.recvBytes = sizeof(float) * 8;
  spec.sendOnDevice = spec.recvOnDevice = true;
  spec.recv = r.data();
  spec.count = 8;
  spec.elemSize = sizeof(float);
  h.exec->enqueue(&b, spec, [&](const HostView&) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(2);
  });
  h.exec->enqueueDevice(&b, 0, [&](const DeviceWork&) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(3);
  });
  std::this_thread::sleep_for(100ms);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(order.empty()) << "a later job overtook the first";
  }
  a.openGate();
  ASSERT_TRUE(a.sync());
  ASSERT_TRUE(b.sync());
  EXPECT_TRUE(h.exec->waitIdle(5));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(StreamDeviceJob, FailureIsReportedAfterItsQueuedWorkCompleted) {
  Harness h;
  h.backend->copyDelay = 100ms;
  fake::Stream stream;
  std::vector<float> src = iota(32), dst(32, 0.0f), seenByLaterWork;
  h.exec->enqueueDevice(&stream, 0, [&](const DeviceWork& w) {
    h.backend->copyAsync(dst.data(), src.data(), 32 * sizeof(float), w.stream, 0);
    throw coll::Error(collUnhandledCudaError, "cudaMemcpyAsync: simulated failure");
  });
  stream.post([&] { seenByLaterWork = dst; });
  ASSERT_TRUE(stream.sync());
  // The stream went on only after the copy the job had queued finished writing.
  EXPECT_EQ(seenByLaterWork, src);
  EXPECT_TRUE(h.exec->waitIdle(5));
  auto errs = h.errorsSeen();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].code(), collUnhandledCudaError);
  EXPECT_NE(std::string(errs[0].what()).find("simulated failure"), std::string::npos);
}

TEST(StreamDeviceJob, StreamThatNeverArrivesTimesOut) {
  Harness h(0.3);
  fake::Stream stream;
  stream.closeGate();
  std::atomic<bool> ran{false};
  h.exec->enqueueDevice(&stream, 0, [&](const DeviceWork&) { ran = true; });
  EXPECT_TRUE(h.exec->waitIdle(5));
  auto errs = h.errorsSeen();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].code(), collTimeout);
  stream.openGate();
  ASSERT_TRUE(stream.sync(2));
  EXPECT_FALSE(ran.load());
}

TEST(StreamDeviceJob, SyncWaitsNoLongerThanTheTimeout) {
  // Before the executor: its stream still finishes the slow copy when it is destroyed.
  std::vector<float> src = iota(4), dst(4, 0.0f);
  Harness h(0.2);
  h.backend->copyDelay = 1500ms;
  fake::Stream stream;
  std::atomic<bool> timedOut{false};
  h.exec->enqueueDevice(&stream, 0, [&](const DeviceWork& w) {
    h.backend->copyAsync(dst.data(), src.data(), sizeof(float) * 4, w.stream, 0);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      w.sync();
    } catch (const coll::Error& e) {
      timedOut = e.code() == collTimeout;
      EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
      throw;
    }
  });
  ASSERT_TRUE(stream.sync(5));
  EXPECT_TRUE(timedOut.load());
  EXPECT_TRUE(h.exec->waitIdle(5));
  EXPECT_GE(h.errorsSeen().size(), 1u);
}

TEST(StreamDeviceJob, AbortFailsQueuedDeviceJobsAtOnce) {
  Harness h(30);
  fake::Stream stream;
  stream.closeGate();
  std::atomic<int> ran{0};
  h.exec->enqueueDevice(&stream, 0, [&](const DeviceWork&) { ++ran; });
  h.exec->enqueueDevice(&stream, 0, [&](const DeviceWork&) { ++ran; });
  const auto t0 = std::chrono::steady_clock::now();
  h.exec->abort();
  EXPECT_TRUE(h.exec->waitIdle(5));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(h.errorsSeen().size(), 2u);
  stream.openGate();
  ASSERT_TRUE(stream.sync(2));
  EXPECT_EQ(ran.load(), 0);
}

TEST(StreamDeviceJob, RejectsAJobWithoutWork) {
  Harness h;
  fake::Stream stream;
  EXPECT_THROW(h.exec->enqueueDevice(&stream, 0, DeviceCollective{}), coll::Error);
  h.backend->capturingStream = &stream;
  EXPECT_THROW(h.exec->enqueueDevice(&stream, 0, [](const DeviceWork&) {}), coll::Error);
  EXPECT_EQ(h.exec->pending(), 0u);
  EXPECT_EQ(h.backend->eventsLive.load(), 0);
}
