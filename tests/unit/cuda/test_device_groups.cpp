// Device buffers through the C API, with the simulated CUDA runtime (fake_backend.hpp)
// in place of the real one: N ranks as threads over real transports, "device" buffers
// that are host memory the runtime reports as device memory. Groups of stream-ordered
// ops launched as one unit at collGroupEnd (values, stream order on one and on two
// streams, host and device ops mixed, errors at the call and at collGroupEnd, failures
// that must not hang a stream) and nonblocking calls on device buffers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../collectives/harness.hpp"
#include "comm/handles.hpp"
#include "fake_backend.hpp"

using namespace std::chrono_literals;
using testing_coll::ScopedEnv;

namespace {

// Host memory that the simulated runtime reports as memory of `device`.
template <typename T>
class DeviceBuf {
 public:
  DeviceBuf(fake::Backend& b, size_t n, T init = T{}, int device = 0) : b_(b), v_(n, init) {
    b_.markDevice(v_.data(), n * sizeof(T), device);
  }
  ~DeviceBuf() { b_.unmarkDevice(v_.data()); }
  T* get() { return v_.data(); }
  T& operator[](size_t i) { return v_[i]; }
  const std::vector<T>& values() const { return v_; }

 private:
  fake::Backend& b_;
  std::vector<T> v_;
};

// Communicators whose CUDA runtime is the simulated one, and two streams per rank.
// CUDA IPC is off: its device-to-device path needs a real GPU.
class FakeCudaJob {
 public:
  explicit FakeCudaJob(int n, const char* timeout = "30")
      : ipcOff_("COLL_CUDA_IPC", "0"), timeout_("COLL_TIMEOUT", timeout), streams_(2 * n), job_(n) {
    for (int r = 0; r < n; ++r)
      if (job_.comm(r)) job_.comm(r)->cudaBackend = backend;
  }
  bool ok() const { return job_.ok(); }
  fake::Stream& stream(int rank, int which = 0) { return streams_[2 * rank + which]; }
  void run(const std::function<void(int, collComm_t)>& fn) { job_.run(fn); }

  std::shared_ptr<fake::Backend> backend = std::make_shared<fake::Backend>();

 private:
  ScopedEnv ipcOff_, timeout_;
  std::vector<fake::Stream> streams_;  // outlive the communicators, whose jobs hold them
  testing_coll::Job job_;
};

collStream_t on(fake::Stream& s) { return &s; }

bool mentions(const char* text, const char* what) { return std::string(text).find(what) != std::string::npos; }

collResult_t asyncErrorOf(collComm_t c) {
  collResult_t e = collInternalError;
  EXPECT_EQ(collCommGetAsyncError(c, &e), collSuccess);
  return e;
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// An all-reduce and a ring of sends and receives in one group, on a stream whose earlier
// work writes the inputs: collGroupEnd returns while that work is still held back, and
// work queued afterwards sees every result.
class DeviceGroup : public ::testing::TestWithParam<int> {};

TEST_P(DeviceGroup, AllReduceAndRingSendRecvGiveTheReference) {
  const int n = GetParam();
  FakeCudaJob job(n);
  ASSERT_TRUE(job.ok());
  const size_t count = 1031;
  job.run([&](int r, collComm_t c) {
    fake::Backend& b = *job.backend;
    fake::Stream& s = job.stream(r);
    DeviceBuf<float> in(b, count), out(b, count), ps(b, count), pr(b, count, -1.0f);
    s.closeGate();
    s.post([&] {
      for (size_t i = 0; i < count; ++i) {
        in[i] = static_cast<float>(r + 1) + static_cast<float>(i);
        ps[i] = 1000.0f * static_cast<float>(r) + static_cast<float>(i);
      }
    });
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(collGroupStart(), collSuccess);
    ASSERT_EQ(collAllReduce(in.get(), out.get(), count, collFloat32, collSum, c, on(s)), collSuccess)
        << collGetLastError(c);
    ASSERT_EQ(collSend(ps.get(), count, collFloat32, (r + 1) % n, c, on(s)), collSuccess) << collGetLastError(c);
    ASSERT_EQ(collRecv(pr.get(), count, collFloat32, (r + n - 1) % n, c, on(s)), collSuccess)
        << collGetLastError(c);
    ASSERT_EQ(collGroupEnd(), collSuccess) << collGetLastError(c);
    EXPECT_LT(secondsSince(t0), 1.0) << "collGroupEnd waited for the stream";
    std::vector<float> sum, got;
    s.post([&] {
      sum = out.values();
      got = pr.values();
    });
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(out[0], 0.0f) << "the group ran before the stream's earlier work";
    s.openGate();
    ASSERT_TRUE(s.sync(30));
    const int prev = (r + n - 1) % n;
    ASSERT_EQ(sum.size(), count);
    ASSERT_EQ(got.size(), count);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(sum[i], static_cast<float>(n * (n + 1) / 2) + static_cast<float>(n) * static_cast<float>(i)) << i;
      ASSERT_EQ(got[i], 1000.0f * static_cast<float>(prev) + static_cast<float>(i)) << i;
    }
    EXPECT_EQ(asyncErrorOf(c), collSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceGroup, ::testing::Values(2, 3, 4));

// Ops of one group on two streams: the unit waits for both streams' earlier work, and
// both streams wait for the unit.
TEST(DeviceGroups, TwoStreamsWaitForEachOtherThroughTheGroup) {
  FakeCudaJob job(2);
  ASSERT_TRUE(job.ok());
  const size_t count = 257;
  job.run([&](int r, collComm_t c) {
    fake::Backend& b = *job.backend;
    fake::Stream& a = job.stream(r, 0);
    fake::Stream& p2p = job.stream(r, 1);
    DeviceBuf<int32_t> in(b, count, r + 1), out(b, count), ps(b, count), pr(b, count);
    p2p.closeGate();
    p2p.post([&] {
      for (size_t i = 0; i < count; ++i) ps[i] = 10 * (r + 1) + static_cast<int32_t>(i);
    });
    ASSERT_EQ(collGroupStart(), collSuccess);
    ASSERT_EQ(collAllReduce(in.get(), out.get(), count, collInt32, collSum, c, on(a)), collSuccess);
    ASSERT_EQ(collSend(ps.get(), count, collInt32, 1 - r, c, on(p2p)), collSuccess);
    ASSERT_EQ(collRecv(pr.get(), count, collInt32, 1 - r, c, on(p2p)), collSuccess);
    ASSERT_EQ(collGroupEnd(), collSuccess) << collGetLastError(c);
    std::atomic<bool> laterOnA{false};
    std::vector<int32_t> seen;
    a.post([&] {
      seen = pr.values();
      laterOnA = true;
    });
    std::this_thread::sleep_for(60ms);
    EXPECT_FALSE(laterOnA.load()) << "stream a went on before the group, held by the other stream, ran";
    p2p.openGate();
    ASSERT_TRUE(a.sync(30));
    ASSERT_TRUE(p2p.sync(30));
    ASSERT_EQ(seen.size(), count);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], 3) << i;
      ASSERT_EQ(seen[i], 10 * (2 - r) + static_cast<int32_t>(i)) << i;
    }
  });
}

// Host-buffer ops without a stream in a group with device ops: one unit, and their
// results are in host memory when collGroupEnd returns, as outside a group, even while
// the device ops' stream holds the unit back.
TEST(DeviceGroups, HostAndDeviceOpsMixInOneGroup) {
  const int n = 3;
  FakeCudaJob job(n);
  ASSERT_TRUE(job.ok());
  const size_t count = 100;
  job.run([&](int r, collComm_t c) {
    fake::Backend& b = *job.backend;
    fake::Stream& s = job.stream(r);
    DeviceBuf<double> din(b, count, 0.5 * (r + 1)), dout(b, count);
    std::vector<int64_t> hin(count, r), hout(count * n, -1), hsend(count, 7 * r), hrecv(count, -1);
    s.closeGate();
    std::thread opener([&] {
      std::this_thread::sleep_for(150ms);
      s.openGate();
    });
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(collGroupStart(), collSuccess);
    ASSERT_EQ(collAllGather(hin.data(), hout.data(), count, collInt64, c, nullptr), collSuccess);
    ASSERT_EQ(collAllReduce(din.get(), dout.get(), count, collFloat64, collMax, c, on(s)), collSuccess);
    ASSERT_EQ(collSend(hsend.data(), count, collInt64, (r + 1) % n, c, nullptr), collSuccess);
    ASSERT_EQ(collRecv(hrecv.data(), count, collInt64, (r + n - 1) % n, c, nullptr), collSuccess);
    const collResult_t end = collGroupEnd();
    const double waited = secondsSince(t0);
    opener.join();
    ASSERT_EQ(end, collSuccess) << collGetLastError(c);
    EXPECT_GE(waited, 0.1) << "collGroupEnd returned before its host-buffer ops ran";
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(hout[q * count + i], q) << q << " " << i;
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(hrecv[i], 7 * ((r + n - 1) % n)) << i;
    ASSERT_TRUE(s.sync(30));
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(dout[i], 1.5) << i;
  });
}

// A group of one stream-ordered op takes the path of that op outside a group, so ranks
// that group it and ranks that do not still match.
TEST(DeviceGroups, GroupOfOneMatchesTheSameOpOutsideAGroup) {
  ScopedEnv chunks("COLL_CUDA_STAGE_CHUNK", "4096");  // 5 chunks outside a group
  FakeCudaJob job(2, "5");
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    fake::Stream& s = job.stream(r);
    DeviceBuf<float> x(*job.backend, 5000, static_cast<float>(r + 2));
    if (r == 0) {
      ASSERT_EQ(collGroupStart(), collSuccess);
    }
    ASSERT_EQ(collAllReduce(x.get(), x.get(), 5000, collFloat32, collProd, c, on(s)), collSuccess);
    if (r == 0) {
      ASSERT_EQ(collGroupEnd(), collSuccess) << collGetLastError(c);
    }
    ASSERT_TRUE(s.sync(30));
    for (size_t i = 0; i < 5000; ++i) ASSERT_EQ(x[i], 6.0f) << i;
  });
}

// Bad arguments inside a group fail at the call and leave the rest of the group to run.
TEST(DeviceGroups, BadArgumentsFailAtTheCall) {
  FakeCudaJob job(2);
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    fake::Stream& s = job.stream(r);
    DeviceBuf<float> x(*job.backend, 64, 1.0f), y(*job.backend, 64);
    ASSERT_EQ(collGroupStart(), collSuccess);
    EXPECT_EQ(collAllReduce(x.get(), y.get(), 64, static_cast<collDataType_t>(99), collSum, c, on(s)),
              collInvalidArgument);
    EXPECT_TRUE(mentions(collGetLastError(c), "datatype")) << collGetLastError(c);
    EXPECT_EQ(collSend(x.get(), 64, collFloat32, 5, c, on(s)), collInvalidArgument);
    EXPECT_TRUE(mentions(collGetLastError(c), "peer")) << collGetLastError(c);
    EXPECT_EQ(collAllReduce(x.get(), x.get() + 1, 64, collFloat32, collSum, c, on(s)), collInvalidArgument);
    EXPECT_TRUE(mentions(collGetLastError(c), "overlap")) << collGetLastError(c);
    ASSERT_EQ(collAllReduce(x.get(), y.get(), 64, collFloat32, collSum, c, on(s)), collSuccess);
    ASSERT_EQ(collBroadcast(y.get(), y.get(), 64, collFloat32, 1, c, on(s)), collSuccess);
    ASSERT_EQ(collGroupEnd(), collSuccess) << collGetLastError(c);
    ASSERT_TRUE(s.sync(30));
    for (size_t i = 0; i < 64; ++i) ASSERT_EQ(y[i], 2.0f) << i;
    EXPECT_EQ(asyncErrorOf(c), collSuccess);
  });
}

// What can only be checked for the group as a whole fails at collGroupEnd, on every rank
// alike and before anything is queued: no rank waits, no stream is held, and the
// communicator stays usable.
TEST(DeviceGroups, GroupOnTwoDevicesOrACapturedStreamFailsAtGroupEnd) {
  FakeCudaJob job(2);
  ASSERT_TRUE(job.ok());
  fake::Stream& captured = job.stream(0, 1);  // both ranks name it; nothing ever runs on it
  job.backend->capturingStream = &captured;
  job.run([&](int r, collComm_t c) {
    fake::Backend& b = *job.backend;
    fake::Stream& s = job.stream(r, 0);
    DeviceBuf<float> d0(b, 32, 1.0f, 0), d1(b, 32, 1.0f, 1);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(collGroupStart(), collSuccess);
    ASSERT_EQ(collAllReduce(d0.get(), d0.get(), 32, collFloat32, collSum, c, on(s)), collSuccess);
    ASSERT_EQ(collAllReduce(d1.get(), d1.get(), 32, collFloat32, collSum, c, on(s)), collSuccess);
    EXPECT_EQ(collGroupEnd(), collInvalidArgument);
    EXPECT_TRUE(mentions(collGetLastError(c), "mixes devices 0 and 1")) << collGetLastError(c);

    // The simulated runtime says this stream is being captured into a graph.
    ASSERT_EQ(collGroupStart(), collSuccess);
    ASSERT_EQ(collAllReduce(d0.get(), d0.get(), 32, collFloat32, collSum, c, on(s)), collSuccess);
    ASSERT_EQ(collAllReduce(d0.get(), d0.get(), 32, collFloat32, collSum, c, on(captured)), collSuccess);
    EXPECT_EQ(collGroupEnd(), collInvalidUsage);
    EXPECT_TRUE(mentions(collGetLastError(c), "captured")) << collGetLastError(c);
    EXPECT_LT(secondsSince(t0), 2.0);

    ASSERT_TRUE(s.sync(2)) << "a refused group left its stream held";
    EXPECT_EQ(asyncErrorOf(c), collSuccess);
    EXPECT_EQ(d0[0], 1.0f) << "a refused group ran";
    ASSERT_EQ(collAllReduce(d0.get(), d0.get(), 32, collFloat32, collSum, c, on(s)), collSuccess);
    ASSERT_TRUE(s.sync(30));
    EXPECT_EQ(d0[31], 2.0f);
  });
}

// A group that fails once launched: a receive from self with no send. All stream-ordered:
// collGroupEnd succeeds, the failure becomes the communicator's async error and the
// stream goes on. With a host-buffer op in the group, collGroupEnd returns the failure.
TEST(DeviceGroups, FailureAfterLaunchIsAnAsyncErrorOrGroupEndsResult) {
  for (bool withHostOp : {false, true}) {
    SCOPED_TRACE(withHostOp ? "with a host op" : "stream-ordered only");
    FakeCudaJob job(1);
    ASSERT_TRUE(job.ok());
    job.run([&](int r, collComm_t c) {
      fake::Stream& s = job.stream(r);
      DeviceBuf<float> x(*job.backend, 16, 1.0f), y(*job.backend, 16, -1.0f);
      std::vector<float> host(16, -1.0f);
      ASSERT_EQ(collGroupStart(), collSuccess);
      ASSERT_EQ(collAllReduce(x.get(), x.get(), 16, collFloat32, collSum, c, on(s)), collSuccess);
      if (withHostOp) ASSERT_EQ(collRecv(host.data(), 16, collFloat32, 0, c, nullptr), collSuccess);
      else ASSERT_EQ(collRecv(y.get(), 16, collFloat32, 0, c, on(s)), collSuccess);
      const auto t0 = std::chrono::steady_clock::now();
      const collResult_t end = collGroupEnd();
      EXPECT_LT(secondsSince(t0), 10.0);
      if (withHostOp) {
        EXPECT_EQ(end, collInvalidUsage);
        EXPECT_TRUE(mentions(collGetLastError(c), "pair up")) << collGetLastError(c);
      } else {
        EXPECT_EQ(end, collSuccess) << collGetLastError(c);
      }
      ASSERT_TRUE(s.sync(10)) << "the failed group left its stream held";
      EXPECT_EQ(asyncErrorOf(c), collInvalidUsage);
      EXPECT_EQ(y[0], -1.0f);
      // Later work fails fast instead of hanging.
      std::vector<float> h(4, 1.0f);
      EXPECT_EQ(collAllReduce(h.data(), h.data(), 4, collFloat32, collSum, c, nullptr), collInvalidUsage);
    });
  }
}

// A rank whose group waits for a peer that never sends: the unit times out after
// COLL_TIMEOUT, the stream is released, the error is the communicator's and the failed
// unit copies no results back. The peer, whose group holds only the all-reduce, is fine.
TEST(DeviceGroups, UnmatchedReceiveTimesOutWithoutHangingTheStream) {
  FakeCudaJob job(2, "2");
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    fake::Stream& s = job.stream(r);
    DeviceBuf<float> x(*job.backend, 8, 1.0f), y(*job.backend, 8, -1.0f);
    ASSERT_EQ(collGroupStart(), collSuccess);
    ASSERT_EQ(collAllReduce(x.get(), x.get(), 8, collFloat32, collSum, c, on(s)), collSuccess);
    if (r == 0) {
      ASSERT_EQ(collRecv(y.get(), 8, collFloat32, 1, c, on(s)), collSuccess);
    }
    ASSERT_EQ(collGroupEnd(), collSuccess) << collGetLastError(c);
    ASSERT_TRUE(s.sync(20)) << "the stream is still held";
    if (r == 0) {
      EXPECT_EQ(asyncErrorOf(c), collTimeout);
      EXPECT_EQ(x[0], 1.0f);
      EXPECT_EQ(y[0], -1.0f);
    } else {
      EXPECT_EQ(asyncErrorOf(c), collSuccess);
      EXPECT_EQ(x[0], 2.0f);
    }
  });
}

// Nonblocking collectives on device buffers: staged on the communicator's own stream;
// the request completes once the results are in device memory.
TEST(DeviceNonblocking, CollectivesCompleteWithTheResultsInDeviceMemory) {
  const int n = 3;
  FakeCudaJob job(n);
  ASSERT_TRUE(job.ok());
  const size_t count = 333;
  job.run([&](int r, collComm_t c) {
    fake::Backend& b = *job.backend;
    fake::Stream& app = job.stream(r);
    app.closeGate();  // an application stream that is busy does not hold these up
    DeviceBuf<int32_t> in(b, count, r + 1), sum(b, count), all(b, count * n, -1);
    collRequest_t reduce = nullptr, gather = nullptr;
    ASSERT_EQ(collIallReduce(in.get(), sum.get(), count, collInt32, collSum, c, &reduce), collSuccess)
        << collGetLastError(c);
    ASSERT_EQ(collIallGather(in.get(), all.get(), count, collInt32, c, &gather), collSuccess);
    ASSERT_EQ(collWait(&reduce), collSuccess) << collGetLastError(c);
    EXPECT_EQ(reduce, nullptr);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(sum[i], n * (n + 1) / 2) << i;
    int done = 0;
    collResult_t res = collInProgress;
    for (int spin = 0; spin < 20000 && !done; ++spin) {
      res = collTest(&gather, &done);
      if (!done) std::this_thread::sleep_for(1ms);
    }
    ASSERT_EQ(done, 1);
    EXPECT_EQ(res, collSuccess);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(all[q * count + i], q + 1) << q << " " << i;
    // Host-buffer calls after them keep the communicator's issue order.
    int32_t h = r, hs = 0;
    ASSERT_EQ(collAllReduce(&h, &hs, 1, collInt32, collSum, c, nullptr), collSuccess);
    EXPECT_EQ(hs, n * (n - 1) / 2);
    app.openGate();
  });
}

// Gather and scatter of device buffers, on a stream and nonblocking: staged through host
// memory like all-gather, the root's side being nranks blocks (in place at its own block),
// the other ranks passing NULL for it.
TEST(DeviceGatherScatter, StagedResultsOnStreamsAndNonblocking) {
  ScopedEnv chunks("COLL_CUDA_STAGE_CHUNK", "4096");
  const int n = 3, gatherRoot = 1, scatterRoot = 2;
  FakeCudaJob job(n);
  ASSERT_TRUE(job.ok());
  const size_t count = 3001;
  job.run([&](int r, collComm_t c) {
    fake::Backend& b = *job.backend;
    fake::Stream& s = job.stream(r);
    DeviceBuf<int32_t> mine(b, count), all(b, count * n, -1), part(b, count, -1), part2(b, count, -1);
    for (size_t i = 0; i < count; ++i) mine[i] = 1000 * r + static_cast<int32_t>(i);
    if (r == gatherRoot)
      for (size_t i = 0; i < count; ++i) all[r * count + i] = mine[i];
    const int32_t* gsrc = r == gatherRoot ? all.get() + r * count : mine.get();
    ASSERT_EQ(collGather(gsrc, r == gatherRoot ? all.get() : nullptr, count, collInt32, gatherRoot, c, on(s)),
              collSuccess)
        << collGetLastError(c);
    ASSERT_TRUE(s.sync(30));
    for (int q = 0; r == gatherRoot && q < n; ++q)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(all[q * count + i], 1000 * q + static_cast<int32_t>(i)) << q << " " << i;
    // Scatter: the root's block q holds 7 * q + i.
    DeviceBuf<int32_t> src(b, count * n);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i) src[q * count + i] = 7 * q + static_cast<int32_t>(i);
    const bool root = r == scatterRoot;
    ASSERT_EQ(collScatter(root ? src.get() : nullptr, part.get(), count, collInt32, scatterRoot, c, on(s)),
              collSuccess)
        << collGetLastError(c);
    ASSERT_TRUE(s.sync(30));
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(part[i], 7 * r + static_cast<int32_t>(i)) << i;
    collRequest_t g = nullptr, sc = nullptr;
    ASSERT_EQ(collIgather(mine.get(), r == 0 ? all.get() : nullptr, count, collInt32, 0, c, &g), collSuccess)
        << collGetLastError(c);
    ASSERT_EQ(collIscatter(root ? src.get() : nullptr, part2.get(), count, collInt32, scatterRoot, c, &sc),
              collSuccess);
    ASSERT_EQ(collWait(&g), collSuccess) << collGetLastError(c);
    ASSERT_EQ(collWait(&sc), collSuccess) << collGetLastError(c);
    for (int q = 0; r == 0 && q < n; ++q)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(all[q * count + i], 1000 * q + static_cast<int32_t>(i)) << q << " " << i;
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(part2[i], 7 * r + static_cast<int32_t>(i)) << i;
  });
}

TEST(DeviceNonblocking, SendAndReceiveOfDeviceMemoryAreRefusedWithTheWayOut) {
  FakeCudaJob job(2);
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    DeviceBuf<float> x(*job.backend, 8);
    collRequest_t req = nullptr;
    EXPECT_EQ(collIsend(x.get(), 8, collFloat32, 1 - r, c, &req), collInvalidArgument);
    EXPECT_TRUE(mentions(collGetLastError(c), "inside collGroupStart/collGroupEnd")) << collGetLastError(c);
    EXPECT_EQ(collIrecv(x.get(), 8, collFloat32, 1 - r, c, &req), collInvalidArgument);
    EXPECT_EQ(req, nullptr);
    EXPECT_EQ(asyncErrorOf(c), collSuccess);
  });
}
