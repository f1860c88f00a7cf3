// Stream-ordered collectives on a real GPU: the op waits for earlier work on the stream,
// the caller returns at once, later work sees the result, the legacy default stream
// works, and two ranks all-reduce device buffers through real communicators.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <vector>

#include "../collectives/harness.hpp"
#include "base/op.hpp"
#include "cuda/op_spec.hpp"
#include "cuda/stream_ops.hpp"
#include "gpu_util.hpp"

using namespace coll::cuda;
using namespace std::chrono_literals;

namespace {

// Holds a stream like a long kernel would, until open().
class StreamGate {
 public:
  explicit StreamGate(cudaStream_t s) { COLL_CUDA_CHECK(cudaLaunchHostFunc(s, &hold, this)); }
  ~StreamGate() { open(); }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  static void hold(void* p) {
    auto* g = static_cast<StreamGate*>(p);
    std::unique_lock<std::mutex> lock(g->mu_);
    g->cv_.wait_for(lock, 30s, [&] { return g->open_; });
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

using gputest::Stream;

StreamOptions options(size_t chunk) {
  StreamOptions o;
  o.chunkBytes = chunk;
  o.timeoutSec = 60;
  return o;
}

coll::OpArgs allReduce(const void* s, void* r, size_t n) {
  coll::OpArgs op;
  op.kind = coll::OpKind::AllReduce;
  op.sendbuf = s;
  op.recvbuf = r;
  op.count = n;
  op.dtype = collFloat32;
  op.op = collSum;
  return op;
}

}  // namespace

TEST(GpuStreamOps, RunsInStreamOrderWithoutBlockingTheCaller) {
  COLL_REQUIRE_GPU();
  const size_t n = 2 << 20;  // 8 MiB: 8 pipelined chunks of 1 MiB
  std::vector<float> pattern(n);
  std::iota(pattern.begin(), pattern.end(), 0.0f);
  float* pinned = nullptr;
  COLL_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * sizeof(float)));
  std::copy(pattern.begin(), pattern.end(), pinned);
  gputest::DeviceMemory send(n * 4), recv(n * 4);
  COLL_CUDA_CHECK(cudaMemset(send.get(), 0, n * 4));
  Stream s;
  std::atomic<int> chunks{0}, errors{0};
  {
    auto backend = makeCudaBackend();
    StreamExecutor exec(backend, [&](const coll::Error&) { ++errors; }, options(1 << 20));
    StreamGate gate(s.get());
    // Earlier work on the stream writes the input: the op must see it, not the zeros.
    COLL_CUDA_CHECK(cudaMemcpyAsync(send.get(), pinned, n * 4, cudaMemcpyHostToDevice, s.get()));
    const auto t0 = std::chrono::steady_clock::now();
    exec.enqueue(s.get(), describeOp(*backend, allReduce(send.get(), recv.get(), n), 1, 0), [&](const HostView& v) {
      const auto* in = static_cast<const float*>(v.send);
      auto* out = static_cast<float*>(v.recv);
      for (size_t i = 0; i < v.count; ++i) out[i] = 2 * in[i];
      ++chunks;
    });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms) << "enqueue waited";
    // Later work reads the result back.
    COLL_CUDA_CHECK(cudaMemcpyAsync(pinned, recv.get(), n * 4, cudaMemcpyDeviceToHost, s.get()));
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(chunks.load(), 0) << "ran before earlier work on the stream finished";
    gate.open();
    s.sync();
    EXPECT_TRUE(exec.waitIdle(10));
  }
  EXPECT_EQ(chunks.load(), 8);
  EXPECT_EQ(errors.load(), 0);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(pinned[i], 2 * pattern[i]) << i;
  COLL_CUDA_CHECK(cudaFreeHost(pinned));
}

TEST(GpuStreamOps, LegacyDefaultStreamDoesNotDeadlock) {
  COLL_REQUIRE_GPU();
  const size_t n = 1000;
  std::vector<float> x(n, 1.5f);
  gputest::DeviceMemory buf(n * 4);
  buf.upload(x);
  auto backend = makeCudaBackend();
  StreamExecutor exec(backend, nullptr, options(1024));
  exec.enqueue(nullptr, describeOp(*backend, allReduce(buf.get(), buf.get(), n), 1, 0), [](const HostView& v) {
    auto* p = static_cast<float*>(v.recv);
    for (size_t i = 0; i < v.count; ++i) p[i] += 1;
  });
  COLL_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  for (float v : buf.download<float>(n)) ASSERT_EQ(v, 2.5f);
}

TEST(GpuStreamOps, TwoRanksAllReduceDeviceBuffers) {
  COLL_REQUIRE_GPU();
  testing_coll::Job job(2);
  ASSERT_TRUE(job.ok());
  const size_t n = (3 << 20) + 5;  // chunked, with a short tail chunk
  job.run([&](int rank, collComm_t comm) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(rank + 1) * static_cast<float>(i % 1000);
    gputest::DeviceMemory send(n * 4), recv(n * 4);
    send.upload(x);
    Stream s;
    std::atomic<int> errors{0};
    auto backend = makeCudaBackend();
    StreamExecutor exec(backend, [&](const coll::Error&) { ++errors; }, options(4 << 20));
    exec.enqueue(s.get(), describeOp(*backend, allReduce(send.get(), recv.get(), n), 2, rank), [&](const HostView& v) {
      const collResult_t rc = collAllReduce(v.send, v.recv, v.count, collFloat32, collSum, comm, nullptr);
      if (rc != collSuccess) COLL_THROW(rc, collGetLastError(comm));
    });
    s.sync();
    EXPECT_EQ(errors.load(), 0);
    const auto y = recv.download<float>(n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 3.0f * static_cast<float>(i % 1000)) << "rank " << rank << " " << i;
  });
}

// Through the public C API: device buffers with a stream are stream-ordered, and a
// host-buffer collective issued afterwards on the same communicator runs after them on
// every rank (issue order), so the two ranks never cross-match operations.
TEST(GpuStreamOps, PublicApiDeviceThenHostCollectives) {
  COLL_REQUIRE_GPU();
  testing_coll::Job job(2);
  ASSERT_TRUE(job.ok());
  const size_t n = (5 << 20) + 3;
  job.run([&](int rank, collComm_t comm) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(rank + 1) * static_cast<float>(i % 977);
    gputest::DeviceMemory buf(n * 4);
    buf.upload(x);
    Stream s;
    ASSERT_EQ(collAllReduce(buf.get(), buf.get(), n, collFloat32, collSum, comm, s.get()), collSuccess)
        << collGetLastError(comm);
    std::vector<int32_t> h(7, rank + 1), hout(7, 0);
    ASSERT_EQ(collAllReduce(h.data(), hout.data(), 7, collInt32, collSum, comm, nullptr), collSuccess)
        << collGetLastError(comm);
    for (int32_t v : hout) EXPECT_EQ(v, 3);
    s.sync();
    collResult_t async = collSuccess;
    ASSERT_EQ(collCommGetAsyncError(comm, &async), collSuccess);
    EXPECT_EQ(async, collSuccess);
    const auto y = buf.download<float>(n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 3.0f * static_cast<float>(i % 977)) << i;
    // Nonblocking collectives take device buffers too (the input is ready: s was synced);
    // nonblocking send/recv do not.
    collRequest_t req = nullptr;
    ASSERT_EQ(collIallReduce(buf.get(), buf.get(), n, collFloat32, collSum, comm, &req), collSuccess)
        << collGetLastError(comm);
    ASSERT_EQ(collWait(&req), collSuccess) << collGetLastError(comm);
    const auto z = buf.download<float>(n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(z[i], 6.0f * static_cast<float>(i % 977)) << i;
    EXPECT_EQ(collIsend(buf.get(), n, collFloat32, 1 - rank, comm, &req), collInvalidArgument);
  });
}

// A group of device-buffer ops on two real streams: an all-reduce on one, a send/recv
// exchange on the other, launched as one unit at collGroupEnd.
TEST(GpuStreamOps, GroupOfDeviceOpsOnTwoStreams) {
  COLL_REQUIRE_GPU();
  testing_coll::ScopedEnv ipcOff("COLL_CUDA_IPC", "0");  // host staging, the path groups take
  testing_coll::Job job(2);
  ASSERT_TRUE(job.ok());
  const size_t n = (1 << 20) + 7;
  job.run([&](int rank, collComm_t comm) {
    std::vector<float> x(n), p(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(rank + 1) * static_cast<float>(i % 499);
      p[i] = static_cast<float>(100 * rank) + static_cast<float>(i % 31);
    }
    gputest::DeviceMemory in(n * 4), out(n * 4), ps(n * 4), pr(n * 4);
    in.upload(x);
    ps.upload(p);
    Stream a, b;
    ASSERT_EQ(collGroupStart(), collSuccess);
    ASSERT_EQ(collAllReduce(in.get(), out.get(), n, collFloat32, collSum, comm, a.get()), collSuccess);
    ASSERT_EQ(collSend(ps.get(), n, collFloat32, 1 - rank, comm, b.get()), collSuccess);
    ASSERT_EQ(collRecv(pr.get(), n, collFloat32, 1 - rank, comm, b.get()), collSuccess);
    ASSERT_EQ(collGroupEnd(), collSuccess) << collGetLastError(comm);
    a.sync();
    b.sync();
    collResult_t async = collSuccess;
    ASSERT_EQ(collCommGetAsyncError(comm, &async), collSuccess);
    EXPECT_EQ(async, collSuccess) << collGetLastError(comm);
    const auto sum = out.download<float>(n);
    const auto got = pr.download<float>(n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(sum[i], 3.0f * static_cast<float>(i % 499)) << i;
      ASSERT_EQ(got[i], static_cast<float>(100 * (1 - rank)) + static_cast<float>(i % 31)) << i;
    }
  });
}
