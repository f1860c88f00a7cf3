// The whole stack over the InfiniBand backend: communicators whose ranks are threads of
// this process, COLL_TRANSPORT=net and COLL_NET=ib, with the fake verbs fabric standing in
// for the NICs. Every collective is checked against a reference on every rank, and a
// failed completion in the middle of a call must end it on every rank. The random call
// sequences of collectives-sequences run here too, and a rank that sends and destroys
// its communicator at once must still deliver.
//
// meson runs this program four times: as the environment comes (zero-copy from the
// default cut-over, one QP), with COLL_IB_ZCOPY=0 (every byte through the slots), with
// COLL_IB_QPS=4, where the fabric also delivers in a random order across QPs, and with
// COLL_IB_PORTS=2, where every connection uses both fake devices (shuffled too). The
// backend reads them once per process.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "collective.h"
#include "base/config.hpp"
#include "fake_verbs.hpp"
#include "tests/unit/collectives/harness.hpp"
#include "tests/unit/collectives/sequences_threads.hpp"
#include "transport/net/ib/ib_counters.hpp"
#include "transport/net/ib/verbs_ops.hpp"
#include "transport/net/net_backend.hpp"

namespace {

using testing_coll::Job;
using testing_coll::Tunables;
namespace fake = coll::net::ib::fake;

// Communicators over the built-in InfiniBand backend. Its own tunables (COLL_IB_*) come
// from the environment (meson.build sets them per test): the library initialises the
// backend once per process, through the plugin interface, which reads nothing else.
const Tunables kOverIb = {{"COLL_TRANSPORT", "net"}, {"COLL_NET", "ib"}, {"COLL_NET_PLUGIN", ""}};
Tunables overIb(const char* timeout) {
  Tunables t = kOverIb;
  t.emplace_back("COLL_TIMEOUT", timeout);
  return t;
}

// One fabric for the whole program: the library keeps the backend it initialised (and
// with it this fabric's verbs) for the life of the process.
fake::FakeFabric& fabric() {
  static auto* f = [] {
    auto* fab = new fake::FakeFabric({fake::ibDevice("mlx5_0"), fake::ibDevice("mlx5_1")});
    const char* qps = getenv("COLL_IB_QPS");
    const char* ports = getenv("COLL_IB_PORTS");
    if ((qps && atoi(qps) > 1) || (ports && atoi(ports) > 1)) fab->setShuffle(5);
    coll::net::ib::setVerbsOpsForTesting(fab->ops());
    return fab;
  }();
  return *f;
}

int ports() {
  const char* p = getenv("COLL_IB_PORTS");
  return p ? atoi(p) : 1;
}

bool zeroCopy() {
  const char* z = getenv("COLL_IB_ZCOPY");
  return !z || std::string(z) != "0";
}

// The backend's context (the library keeps it once loaded), for its counters.
void* backendContext() {
  std::string why;
  const coll::net::Backend* b = coll::net::backendFor(coll::Config::fromEnv(kOverIb), &why);
  EXPECT_NE(b, nullptr) << why;
  return b ? b->context : nullptr;
}

struct Snapshot {
  coll::net::ib::ByteCounts sent, received;
  fake::FakeFabric::Traffic nic;
  uint64_t port0, port1;  // bytes that left mlx5_0:1 and mlx5_1:1
};
Snapshot snapshot() {
  void* ctx = backendContext();
  return {coll::net::ib::contextSent(ctx), coll::net::ib::contextReceived(ctx), fabric().traffic(),
          fabric().portBytes("mlx5_0", 1), fabric().portBytes("mlx5_1", 1)};
}

class IbCollectives : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { fabric(); }
};

TEST_P(IbCollectives, EveryCollectiveMatchesTheReference) {
  const int n = GetParam();
  Job job(n, overIb("60"));
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    // Sizes around the backend's slot (128 KiB) and a few slots long.
    for (size_t count : {size_t{0}, size_t{1}, size_t{5000}, size_t{32768}, size_t{32769}, size_t{200001}}) {
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((r + 1) * (i % 11));
      ASSERT_EQ(collAllReduce(v.data(), v.data(), count, collFloat32, collSum, c, nullptr), collSuccess)
          << collGetLastError(c);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(v[i], static_cast<float>(n * (n + 1) / 2 * (i % 11))) << i;

      std::vector<int64_t> b(count, r == n - 1 ? 7 : 0);
      ASSERT_EQ(collBroadcast(b.data(), b.data(), count, collInt64, n - 1, c, nullptr), collSuccess);
      for (int64_t x : b) ASSERT_EQ(x, 7);

      std::vector<int32_t> mine(count, r * 3), all(count * n);
      ASSERT_EQ(collAllGather(mine.data(), all.data(), count, collInt32, c, nullptr), collSuccess);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; i += 997) ASSERT_EQ(all[p * count + i], p * 3);

      std::vector<double> rsIn(count * n), rsOut(count);
      for (size_t i = 0; i < rsIn.size(); ++i) rsIn[i] = static_cast<double>(i + r);
      ASSERT_EQ(collReduceScatter(rsIn.data(), rsOut.data(), count, collFloat64, collMax, c, nullptr), collSuccess);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(rsOut[i], static_cast<double>(r * count + i + n - 1));

      std::vector<uint8_t> a2aIn(count * n), a2aOut(count * n);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i) a2aIn[p * count + i] = static_cast<uint8_t>(r * 16 + p);
      ASSERT_EQ(collAllToAll(a2aIn.data(), a2aOut.data(), count, collUint8, c, nullptr), collSuccess);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; i += 101) ASSERT_EQ(a2aOut[p * count + i], static_cast<uint8_t>(p * 16 + r));
    }
    ASSERT_EQ(collBarrier(c), collSuccess);
  });
  EXPECT_TRUE(fabric().misuse().empty()) << fabric().misuse().front();
  Snapshot after = snapshot();
  if (zeroCopy()) EXPECT_GT(after.sent.zcopyMsgs, 0u);
  else EXPECT_EQ(after.nic.writes, 0u);
}

INSTANTIATE_TEST_SUITE_P(Ranks, IbCollectives, ::testing::Values(2, 3, 4));

// Every message of a large all-reduce is above the cut-over: the CPU copies nothing, the
// NICs write the payload from user buffers and the slots carry only headers. With
// zero-copy off, every byte is copied in on the sender and out on the receiver.
TEST_F(IbCollectives, LargeAllReduceCopiesNothingWithZeroCopy) {
  const int n = 4;
  const size_t count = size_t(4) << 20;
  Job job(n, overIb("60"));
  ASSERT_TRUE(job.ok());
  Snapshot before = snapshot();
  job.run([&](int r, collComm_t c) {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>((r + 1) * (i % 7));
    ASSERT_EQ(collAllReduce(v.data(), v.data(), count, collFloat32, collSum, c, nullptr), collSuccess)
        << collGetLastError(c);
    for (size_t i = 0; i < count; i += 4099) ASSERT_EQ(v[i], static_cast<float>(n * (n + 1) / 2 * (i % 7))) << i;
  });
  Snapshot after = snapshot();
  const uint64_t msgs = (after.sent.zcopyMsgs + after.sent.eagerMsgs) - (before.sent.zcopyMsgs + before.sent.eagerMsgs);
  const uint64_t payload = (after.sent.zcopyBytes + after.sent.eagerBytes) - (before.sent.zcopyBytes + before.sent.eagerBytes);
  const uint64_t copied = (after.sent.copiedBytes - before.sent.copiedBytes) + (after.received.copiedBytes - before.received.copiedBytes);
  const uint64_t slotBytes = after.nic.sendBytes - before.nic.sendBytes;
  const uint64_t written = after.nic.writeBytes - before.nic.writeBytes;
  ASSERT_GT(msgs, 0u);
  ASSERT_GE(payload, count * sizeof(float));
  if (zeroCopy()) {
    EXPECT_EQ(copied, 0u) << "copies per byte sent above the cut-over must be 0";
    EXPECT_EQ(written, payload);
    // A header per message, a region back, credit returns: no payload.
    EXPECT_LE(slotBytes, 96 * msgs) << slotBytes << " bytes through the slots for " << msgs << " messages";
    if (ports() > 1) {  // every connection's stripes over both devices
      const uint64_t p0 = after.port0 - before.port0, p1 = after.port1 - before.port1;
      EXPECT_GE(p0 + p1, written);
      EXPECT_GE(p0, (p0 + p1) * 3 / 10) << "mlx5_0:1 carried " << p0 << " of " << p0 + p1;
      EXPECT_GE(p1, (p0 + p1) * 3 / 10) << "mlx5_1:1 carried " << p1 << " of " << p0 + p1;
    }
  } else {
    EXPECT_EQ(copied, 2 * payload) << "a copy in on the sender and one out on the receiver";
    EXPECT_EQ(written, 0u);
    EXPECT_GE(slotBytes, payload);
  }
}

TEST(IbCollectivesFailure, AFailedCompletionEndsTheCallOnEveryRank) {
  fabric();
  Job job(3, overIb("60"));
  ASSERT_TRUE(job.ok());
  std::vector<collResult_t> rc(3);
  std::vector<std::string> text(3);
  fabric().failNextSend(IBV_WC_RETRY_EXC_ERR);
  auto t0 = std::chrono::steady_clock::now();
  job.run([&](int r, collComm_t c) {
    std::vector<float> v(1 << 20, 1.0f);
    rc[r] = collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, c, nullptr);
    text[r] = collGetLastError(c);
  });
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 30) << "the ranks waited for the timeout";
  bool named = false;
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(rc[r], collSuccess) << "rank " << r;
    if (text[r].find("retry counter exceeded") != std::string::npos) named = true;
  }
  EXPECT_TRUE(named) << text[0] << " | " << text[1] << " | " << text[2];
}

// With COLL_IB_PORTS=2 one of the two ports every connection uses goes down between two
// calls on the same communicators: the second fails on every rank, naming the cause, instead of hanging.
TEST(IbCollectivesFailure, APortThatGoesDownEndsTheCallOnEveryRank) {
  if (ports() < 2) GTEST_SKIP() << "needs COLL_IB_PORTS=2";
  fabric();
  Job job(3, overIb("60"));
  ASSERT_TRUE(job.ok());
  std::vector<collResult_t> rc(3);
  std::vector<std::string> text(3);
  auto t0 = std::chrono::steady_clock::now();
  job.run([&](int, collComm_t c) {
    std::vector<float> v(1 << 20, 1.0f);
    ASSERT_EQ(collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, c, nullptr), collSuccess)
        << collGetLastError(c);
  });
  fabric().setPortState("mlx5_1", 1, IBV_PORT_DOWN);
  job.run([&](int r, collComm_t c) {
    std::vector<float> v(1 << 20, 1.0f);
    rc[r] = collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, c, nullptr);
    text[r] = collGetLastError(c);
  });
  fabric().setPortState("mlx5_1", 1, IBV_PORT_ACTIVE);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 30) << "the ranks waited for the timeout";
  bool named = false;
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(rc[r], collSuccess) << "rank " << r;
    if (text[r].find("mlx5_1:1") != std::string::npos && text[r].find("retry counter exceeded") != std::string::npos)
      named = true;
  }
  EXPECT_TRUE(named) << text[0] << " | " << text[1] << " | " << text[2];
}

// The random call sequences (tests/unit/collectives/sequences.hpp) over the backend, and
// a sender that leaves before its receivers post.
class IbSequences : public IbCollectives {};

TEST_F(IbSequences, FourRanks) { testing_coll::seq::runSequence(4, 6, 200, kOverIb); }
TEST_F(IbSequences, ARankThatLeftEarlyStillDelivers) { testing_coll::seq::checkLeftEarly(kOverIb); }

}  // namespace
