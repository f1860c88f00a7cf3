// The stream executor's group jobs on several streams, completion callbacks and its own
// stream, over the simulated CUDA runtime: a group waits for the earlier work on every
// stream it names, every one of those streams waits for the whole group, a failed
// enqueue leaves no stream held, and a job on the executor's own stream waits for no
// application stream.
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

// A float op of n elements that only sends from (send) or only receives into device memory.
StreamOpSpec oneSided(const float* send, float* recv, size_t n) {
  StreamOpSpec s;
  s.send = send;
  s.sendBytes = send ? n * sizeof(float) : 0;
  s.sendOnDevice = send != nullptr;
  s.recv = recv;
  s.recvBytes = recv ? n * sizeof(float) : 0;
  s.recvOnDevice = recv != nullptr;
  s.count = n;
  s.elemSize = sizeof(float);
  s.elementwise = true;
  return s;
}

StreamOpSpec sendSpec(const float* p, size_t n) { return oneSided(p, nullptr, n); }
StreamOpSpec recvSpec(float* p, size_t n) { return oneSided(nullptr, p, n); }

// A loop back: the group's receive gets its send, plus one.
HostGroupCollective loopBack(size_t n, std::atomic<int>* calls) {
  return [n, calls](const std::vector<HostView>& v) {
    const auto* in = static_cast<const float*>(v[0].send);
    auto* out = static_cast<float*>(v[1].recv);
    for (size_t i = 0; i < n; ++i) out[i] = in[i] + 1;
    ++*calls;
  };
}

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

}  // namespace

// Each stream's earlier work gates the group; work queued after it on either stream sees
// its result. Run once with the sending stream held back and once with the receiving one.
class GroupOnTwoStreams : public ::testing::TestWithParam<int> {};

TEST_P(GroupOnTwoStreams, WaitsForEveryStreamAndEveryStreamWaitsForIt) {
  Harness h;
  fake::Stream a, b;
  fake::Stream& held = GetParam() == 0 ? a : b;
  const size_t n = 64;
  std::vector<float> send(n, 0.0f), recv(n, -1.0f), seenOnA, seenOnB;
  held.closeGate();
  // Earlier work on the sending stream writes the input: the group must see it.
  a.post([&] { std::iota(send.begin(), send.end(), 1.0f); });
  std::atomic<int> calls{0};
  const auto t0 = std::chrono::steady_clock::now();
  h.exec->enqueueGroup({&a, &b}, {sendSpec(send.data(), n), recvSpec(recv.data(), n)}, loopBack(n, &calls));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 200ms) << "enqueue waited";
  a.post([&] { seenOnA = recv; });
  b.post([&] { seenOnB = recv; });
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(calls.load(), 0) << "the group ran before stream " << (GetParam() == 0 ? "a" : "b")
                             << " reached it";
  EXPECT_TRUE(seenOnA.empty() && seenOnB.empty()) << "later work ran before the group";
  held.openGate();
  ASSERT_TRUE(a.sync());
  ASSERT_TRUE(b.sync());
  EXPECT_EQ(calls.load(), 1);
  ASSERT_EQ(seenOnA.size(), n);
  ASSERT_EQ(seenOnB.size(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(seenOnA[i], i + 2.0f) << i;
    ASSERT_EQ(seenOnB[i], i + 2.0f) << i;
  }
  EXPECT_TRUE(h.exec->waitIdle(5));
  EXPECT_TRUE(h.errorsSeen().empty());
  EXPECT_EQ(h.backend->eventsLive.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(HeldStream, GroupOnTwoStreams, ::testing::Values(0, 1));

TEST(StreamGroups, StreamNamedTwiceIsHeldOnce) {
  Harness h;
  fake::Stream a;
  const size_t n = 16;
  std::vector<float> send = iota(n), recv(n, 0.0f);
  std::atomic<int> calls{0};
  h.exec->enqueueGroup({&a, &a}, {sendSpec(send.data(), n), recvSpec(recv.data(), n)}, loopBack(n, &calls));
  ASSERT_TRUE(a.sync());
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(recv[n - 1], n + 1.0f);
  EXPECT_EQ(h.backend->eventsLive.load(), 0);
}

TEST(StreamGroups, MismatchedStreamListIsRejected) {
  Harness h;
  fake::Stream a;
  std::vector<float> buf(4);
  std::atomic<int> calls{0};
  try {
    h.exec->enqueueGroup(std::vector<void*>{&a}, {sendSpec(buf.data(), 4), recvSpec(buf.data(), 4)},
                         loopBack(4, &calls));
    ADD_FAILURE() << "accepted one stream for two ops";
  } catch (const coll::Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("2 op(s) and 1 stream(s)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(h.exec->pending(), 0u);
}

TEST(StreamGroups, RefusedHoldOnOneStreamReleasesTheOthers) {
  Harness h(0, 30);
  fake::Stream a, b;
  const size_t n = 16;
  std::vector<float> send = iota(n), recv(n, 0.0f);
  h.backend->refuseHostFuncOn = &b;
  std::atomic<int> calls{0};
  try {
    h.exec->enqueueGroup({&a, &b}, {sendSpec(send.data(), n), recvSpec(recv.data(), n)}, loopBack(n, &calls));
    ADD_FAILURE() << "the refused host function went unnoticed";
  } catch (const coll::Error& e) {
    EXPECT_EQ(e.code(), collUnhandledCudaError);
  }
  // Stream a already got its host function; it must not wait out the 70 s hold.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(a.sync(5)) << "stream a is still held by a group that will never run";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(h.exec->pending(), 0u);
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(recv[0], 0.0f);
  EXPECT_EQ(h.backend->eventsLive.load(), 0);
  EXPECT_EQ(h.exec->pool().cachedBytes(), 0u) << "staging with a copy queued into it was reused";
}

TEST(StreamGroups, DoneIsToldAfterTheResultsAreBack) {
  Harness h;
  fake::Stream s;
  const size_t n = 32;
  std::vector<float> send = iota(n), recv(n, 0.0f), atDone;
  std::mutex mu;
  collResult_t code = collInProgress;
  std::string msg = "unset";
  StreamOpSpec spec = sendSpec(send.data(), n);
  spec.recv = recv.data();
  spec.recvBytes = n * sizeof(float);
  spec.recvOnDevice = true;
  h.exec->enqueue(&s, spec, [](const HostView& v) {
    for (size_t i = 0; i < v.count; ++i) static_cast<float*>(v.recv)[i] = 3 * static_cast<const float*>(v.send)[i];
  }, [&](collResult_t c, const std::string& m) {
    std::lock_guard<std::mutex> lock(mu);
    code = c;
    msg = m;
    atDone = recv;
  });
  ASSERT_TRUE(s.sync());
  ASSERT_TRUE(h.exec->waitIdle(5));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(code, collSuccess);
  EXPECT_EQ(msg, "");
  ASSERT_EQ(atDone.size(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(atDone[i], 3.0f * (i + 1)) << "not yet copied back at done: " << i;
}

TEST(StreamGroups, DoneCarriesTheFailure) {
  Harness h;
  fake::Stream a, b;
  const size_t n = 8;
  std::vector<float> send = iota(n), recv(n, 0.0f);
  std::atomic<collResult_t> code{collInProgress};
  std::string msg;
  std::mutex mu;
  h.exec->enqueueGroup({&a, &b}, {sendSpec(send.data(), n), recvSpec(recv.data(), n)},
                       [](const std::vector<HostView>&) { COLL_THROW(collRemoteError, "peer 3 hung up"); },
                       [&](collResult_t c, const std::string& m) {
                         std::lock_guard<std::mutex> lock(mu);
                         msg = m;
                         code = c;
                       });
  ASSERT_TRUE(a.sync());
  ASSERT_TRUE(b.sync());
  ASSERT_TRUE(h.exec->waitIdle(5));
  EXPECT_EQ(code.load(), collRemoteError);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_NE(msg.find("peer 3 hung up"), std::string::npos) << msg;
  }
  auto errs = h.errorsSeen();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].code(), collRemoteError);
  EXPECT_EQ(recv[0], 0.0f);
}

TEST(StreamGroups, OwnStreamWaitsForNoApplicationStream) {
  Harness h;
  fake::Stream app;
  app.closeGate();  // the application's streams are busy
  void* own = h.exec->ownStream(0);
  EXPECT_EQ(h.exec->ownStream(0), own);
  EXPECT_EQ(h.backend->streamsLive.load(), 1);
  const size_t n = 8;
  std::vector<float> send = iota(n), recv(n, 0.0f);
  std::atomic<int> calls{0};
  std::atomic<bool> done{false};
  h.exec->enqueueGroup(std::vector<void*>(2, own), {sendSpec(send.data(), n), recvSpec(recv.data(), n)},
                       loopBack(n, &calls), [&](collResult_t c, const std::string&) { done = c == collSuccess; });
  ASSERT_TRUE(h.exec->waitIdle(5)) << "a job on the executor's own stream waited for the application";
  EXPECT_TRUE(done.load());
  EXPECT_EQ(recv[n - 1], n + 1.0f);
  app.openGate();
  ASSERT_TRUE(app.sync());
}
