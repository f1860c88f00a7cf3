// The stream executor over the simulated CUDA runtime (fake_backend.hpp): stream order,
// the host thread never waiting, pipelined chunks, in-place staging, issue order across
// streams, and every failure path reaching the async-error hook without hanging a stream.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
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

using Harness = coll::cuda::testing::ExecutorHarness;

StreamOpSpec floats(const float* send, float* recv, size_t n, bool elementwise = true) {
  StreamOpSpec s;
  s.send = send;
  s.sendBytes = send ? n * sizeof(float) : 0;
  s.sendOnDevice = true;
  s.recv = recv;
  s.recvBytes = recv ? n * sizeof(float) : 0;
  s.recvOnDevice = true;
  s.count = n;
  s.elemSize = sizeof(float);
  s.elementwise = elementwise;
  return s;
}

// A stand-in for an all-reduce over two identical ranks: recv = 2 * send.
HostCollective doubler(std::vector<HostView>* seen, std::mutex* mu) {
  return [seen, mu](const HostView& v) {
    const auto* s = static_cast<const float*>(v.send);
    auto* r = static_cast<float*>(v.recv);
    for (size_t i = 0; i < v.count; ++i) r[i] = 2 * s[i];
    std::lock_guard<std::mutex> lock(*mu);
    seen->push_back(v);
  };
}

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

}  // namespace

TEST(StreamExecutor, ReturnsAtOnceAndRunsWhenTheStreamGetsThere) {
  Harness h(64);  // 16 floats per chunk
  fake::Stream stream;
  std::vector<float> send = iota(100), recv(100, -1.0f), seenByLaterWork;
  std::vector<HostView> views;
  std::mutex mu;
  stream.closeGate();  // earlier work still running
  const auto t0 = std::chrono::steady_clock::now();
  h.exec->enqueue(&stream, floats(send.data(), recv.data(), 100), doubler(&views, &mu));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 200ms);
  // Work queued after the collective must see its result.
  stream.post([&] { seenByLaterWork = recv; });
  std::this_thread::sleep_for(50ms);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(views.empty()) << "ran before the stream reached it";
  }
  EXPECT_EQ(h.exec->pending(), 1u);
  stream.openGate();
  ASSERT_TRUE(stream.sync());
  ASSERT_EQ(seenByLaterWork.size(), 100u);
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(seenByLaterWork[i], 2.0f * (i + 1)) << i;
  ASSERT_EQ(views.size(), 7u);
  for (size_t c = 0; c < 7; ++c) {
    EXPECT_EQ(views[c].offset, 16 * c);
    EXPECT_EQ(views[c].count, c < 6 ? 16u : 4u);
  }
  EXPECT_TRUE(h.exec->waitIdle(5));
  EXPECT_TRUE(h.errorsSeen().empty());
  EXPECT_EQ(h.backend->eventsLive.load(), 0);
}

TEST(StreamExecutor, FirstChunkRunsWhileLaterChunksAreStillCopiedIn) {
  Harness h(256);  // 64 floats per chunk, 4 chunks
  h.backend->copyDelay = 40ms;
  fake::Stream stream;
  std::vector<float> send = iota(256), recv(256, 0.0f);
  std::atomic<bool> firstSeen{false};
  std::chrono::steady_clock::time_point firstChunkAt;
  h.exec->enqueue(&stream, floats(send.data(), recv.data(), 256), [&](const HostView& v) {
    if (v.offset == 0) {
      firstChunkAt = std::chrono::steady_clock::now();
      firstSeen = true;
    }
    for (size_t i = 0; i < v.count; ++i)
      static_cast<float*>(v.recv)[i] = static_cast<const float*>(v.send)[i] + 1;
  });
  ASSERT_TRUE(stream.sync());
  ASSERT_TRUE(firstSeen);
  // The copies into staging are the user stream's writes to host memory other than recv.
  std::chrono::steady_clock::time_point lastCopyIn{};
  for (const auto& c : h.backend->copies())
    if (c.src >= static_cast<const void*>(send.data()) && c.src < static_cast<const void*>(send.data() + 256))
      lastCopyIn = std::max(lastCopyIn, c.finished);
  EXPECT_LT(firstChunkAt, lastCopyIn) << "chunk 0 waited for the whole copy in: no pipelining";
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(recv[i], send[i] + 1) << i;
}

TEST(StreamExecutor, InPlaceAllGatherSeesTheSameAliasingInStaging) {
  Harness h(1024);
  fake::Stream stream;
  const size_t per = 8, ranks = 4, rank = 2;
  std::vector<float> buf(per * ranks, -1.0f);
  for (size_t i = 0; i < per; ++i) buf[rank * per + i] = 100.0f + i;
  StreamOpSpec s = floats(buf.data() + rank * per, buf.data(), per, false);
  s.recvBytes = per * ranks * sizeof(float);
  bool aliased = false;
  h.exec->enqueue(&stream, s, [&](const HostView& v) {
    auto* r = static_cast<float*>(v.recv);
    aliased = v.send == r + rank * per && v.count == per;
    for (size_t q = 0; q < ranks; ++q)
      if (q != rank)
        for (size_t i = 0; i < per; ++i) r[q * per + i] = 10.0f * q + i;
  });
  ASSERT_TRUE(stream.sync());
  EXPECT_TRUE(aliased);
  for (size_t q = 0; q < ranks; ++q)
    for (size_t i = 0; i < per; ++i)
      ASSERT_EQ(buf[q * per + i], q == rank ? 100.0f + i : 10.0f * q + i) << q << " " << i;
}

TEST(StreamExecutor, InPlaceReduceScatterCopiesBackOnlyItsSlice) {
  Harness h;
  fake::Stream stream;
  const size_t per = 4, ranks = 3, rank = 1;
  std::vector<float> buf = iota(per * ranks), before = buf;
  StreamOpSpec s = floats(buf.data(), buf.data() + rank * per, per, false);
  s.sendBytes = per * ranks * sizeof(float);
  bool aliased = false;
  h.exec->enqueue(&stream, s, [&](const HostView& v) {
    auto* staged = static_cast<float*>(const_cast<void*>(v.send));
    aliased = v.recv == staged + rank * per;
    for (size_t q = 0; q < per * ranks; ++q) staged[q] = -staged[q];  // scribble over everything
  });
  ASSERT_TRUE(stream.sync());
  EXPECT_TRUE(aliased);
  for (size_t i = 0; i < per * ranks; ++i) {
    const bool mine = i >= rank * per && i < (rank + 1) * per;
    ASSERT_EQ(buf[i], mine ? -before[i] : before[i]) << i;
  }
}

TEST(StreamExecutor, HostBuffersOnAStreamUseTheCallersMemory) {
  Harness h;
  fake::Stream stream;
  std::vector<float> send = iota(10), recv(10);
  StreamOpSpec s = floats(send.data(), recv.data(), 10);
  s.sendOnDevice = s.recvOnDevice = false;
  const void* sawSend = nullptr;
  h.exec->enqueue(&stream, s, [&](const HostView& v) {
    sawSend = v.send;
    std::memcpy(v.recv, v.send, v.count * sizeof(float));
  });
  ASSERT_TRUE(stream.sync());
  EXPECT_EQ(sawSend, send.data());
  EXPECT_EQ(recv, send);
  EXPECT_EQ(h.backend->pinnedAllocs.load(), 0);
}

TEST(StreamExecutor, CollectiveErrorBecomesAsyncErrorAndTheStreamGoesOn) {
  Harness h(64);
  fake::Stream stream;
  std::vector<float> send = iota(64), recv(64, 7.0f);
  h.exec->enqueue(&stream, floats(send.data(), recv.data(), 64), [&](const HostView& v) {
    if (v.offset == 32) COLL_THROW(collRemoteError, "peer 1 closed its connection");
    std::memcpy(v.recv, v.send, v.count * sizeof(float));
  });
  bool laterWorkRan = false;
  stream.post([&] { laterWorkRan = true; });
  ASSERT_TRUE(stream.sync());
  EXPECT_TRUE(laterWorkRan);
  auto errs = h.errorsSeen();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].code(), collRemoteError);
  EXPECT_NE(std::string(errs[0].what()).find("peer 1 closed"), std::string::npos);
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(recv[i], i < 32 ? send[i] : 7.0f) << i;
  // The executor keeps serving later operations.
  std::vector<HostView> views;
  std::mutex mu;
  h.exec->enqueue(&stream, floats(send.data(), recv.data(), 64), doubler(&views, &mu));
  ASSERT_TRUE(stream.sync());
  EXPECT_EQ(recv[63], 128.0f);
}

TEST(StreamExecutor, StreamThatNeverArrivesTimesOut) {
  Harness h(0, 0.3);
  fake::Stream stream;
  std::vector<float> send = iota(16), recv(16, 0.0f);
  stream.closeGate();
  bool ran = false;
  h.exec->enqueue(&stream, floats(send.data(), recv.data(), 16), [&](const HostView&) { ran = true; });
  EXPECT_TRUE(h.exec->waitIdle(5));
  auto errs = h.errorsSeen();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].code(), collTimeout);
  EXPECT_NE(std::string(errs[0].what()).find("stream to reach"), std::string::npos) << errs[0].what();
  stream.openGate();  // the host function must now return at once
  ASSERT_TRUE(stream.sync(2));
  EXPECT_FALSE(ran);
  EXPECT_EQ(recv[0], 0.0f);
}

TEST(StreamExecutor, JobsRunInIssueOrderWhateverStreamTheyAreOn) {
  Harness h;
  fake::Stream a, b;
  std::vector<float> s1 = iota(4), r1(4), s2 = iota(4), r2(4);
  std::mutex mu;
  std::vector<int> order;
  auto tag = [&](int id) {
    return [&, id](const HostView& v) {
      std::memcpy(v.recv, v.send, v.count * sizeof(float));
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(id);
    };
  };
  a.closeGate();
  h.exec->enqueue(&a, floats(s1.data(), r1.data(), 4), tag(1));
  h.exec->enqueue(&b, floats(s2.data(), r2.data(), 4), tag(2));
  std::this_thread::sleep_for(100ms);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(order.empty()) << "the second op overtook the first";
  }
  EXPECT_FALSE(h.exec->waitIdle(0.05));
  a.openGate();
  ASSERT_TRUE(a.sync());
  ASSERT_TRUE(b.sync());
  EXPECT_TRUE(h.exec->waitIdle(5));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(StreamExecutor, StagingIsCachedAndReused) {
  Harness h;
  fake::Stream stream;
  std::vector<float> send = iota(1000), recv(1000);
  std::vector<HostView> views;
  std::mutex mu;
  for (int i = 0; i < 3; ++i) {
    h.exec->enqueue(&stream, floats(send.data(), recv.data(), 1000), doubler(&views, &mu));
    ASSERT_TRUE(stream.sync());
    ASSERT_TRUE(h.exec->waitIdle(5));
  }
  EXPECT_EQ(h.backend->pinnedAllocs.load(), 1);
  EXPECT_GT(h.exec->pool().cachedBytes(), 0u);
}

TEST(StreamExecutor, RejectedEnqueueQueuesNothing) {
  Harness h;
  fake::Stream stream;
  std::vector<float> buf(100);
  StreamOpSpec overlap = floats(buf.data(), buf.data() + 10, 50);
  auto noop = [](const HostView&) {};
  EXPECT_THROW(h.exec->enqueue(&stream, overlap, noop), coll::Error);
  EXPECT_THROW(h.exec->enqueue(&stream, floats(buf.data(), buf.data(), 10), HostCollective{}), coll::Error);
  h.backend->capturingStream = &stream;
  try {
    h.exec->enqueue(&stream, floats(buf.data(), buf.data(), 10), noop);
    ADD_FAILURE() << "a capturing stream was accepted";
  } catch (const coll::Error& e) {
    EXPECT_EQ(e.code(), collInvalidUsage);
  }
  EXPECT_EQ(h.exec->pending(), 0u);
  ASSERT_TRUE(stream.sync());
  EXPECT_EQ(h.backend->eventsLive.load(), 0);
}

TEST(StreamExecutor, GroupRunsAllItsOpsInOneHostCall) {
  Harness h(16);
  fake::Stream stream;
  std::vector<float> send = iota(8), recv(8, 0.0f);
  StreamOpSpec s = floats(send.data(), nullptr, 8);  // a send
  StreamOpSpec r = floats(nullptr, recv.data(), 8);  // a receive
  int calls = 0;
  h.exec->enqueueGroup(&stream, {s, r}, [&](const std::vector<HostView>& v) {
    ++calls;
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0].recv, nullptr);
    EXPECT_EQ(v[1].send, nullptr);
    EXPECT_EQ(v[0].count, 8u);  // groups are not chunked
    std::memcpy(v[1].recv, v[0].send, 8 * sizeof(float));  // a loop back to self
  });
  ASSERT_TRUE(stream.sync());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(recv, send);
}

TEST(StreamExecutor, FailedCopyBackIsReportedAndItsStagingNotReused) {
  // Declared before the harness, so they outlive it: only its event fails, and the fake
  // copy stream may still be writing the copy-back into recv when the test ends.
  std::vector<float> send = iota(32), recv(32);
  std::vector<HostView> views;
  std::mutex mu;
  Harness h;
  h.backend->failOwnStreamEvents = true;
  fake::Stream stream;
  h.exec->enqueue(&stream, floats(send.data(), recv.data(), 32), doubler(&views, &mu));
  ASSERT_TRUE(stream.sync());
  ASSERT_TRUE(h.exec->waitIdle(5));
  auto errs = h.errorsSeen();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].code(), collUnhandledCudaError);
  EXPECT_EQ(h.exec->pool().cachedBytes(), 0u) << "staging that a copy may still read was reused";
}

TEST(StreamExecutor, DestroyingWithAStuckStreamFailsItsWorkAndReturns) {
  auto backend = std::make_shared<fake::Backend>();
  fake::Stream stream;
  std::vector<float> send = iota(16), recv(16, 0.0f);
  std::atomic<int> errors{0};
  StreamOptions o;
  o.timeoutSec = 0.2;
  stream.closeGate();
  {
    StreamExecutor exec(backend, [&](const coll::Error&) { ++errors; }, o);
    exec.enqueue(&stream, floats(send.data(), recv.data(), 16), [](const HostView&) {});
    // Leaves scope: waits its timeout, fails the job, then gives up on the stream.
  }
  EXPECT_GE(errors.load(), 1);
  stream.openGate();  // the host function runs after the executor is gone
  ASSERT_TRUE(stream.sync(2));
  EXPECT_EQ(recv[0], 0.0f);
}

TEST(StreamExecutor, AbortFailsQueuedWorkAtOnce) {
  Harness h(0, 30);
  fake::Stream stream;
  std::vector<float> send = iota(16), recv(16, 0.0f);
  stream.closeGate();
  h.exec->enqueue(&stream, floats(send.data(), recv.data(), 16), [](const HostView&) {});
  h.exec->enqueue(&stream, floats(send.data(), recv.data(), 16), [](const HostView&) {});
  const auto t0 = std::chrono::steady_clock::now();
  h.exec->abort();
  EXPECT_TRUE(h.exec->waitIdle(5));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "abort waited for the stream";
  auto errs = h.errorsSeen();
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].code(), collInvalidUsage);
  stream.openGate();
  ASSERT_TRUE(stream.sync(2));
  EXPECT_EQ(recv[0], 0.0f);
}
