// The whole stack over the InfiniBand backend: communicators whose ranks are threads of
// this process, COLL_TRANSPORT=net and COLL_NET=ib, with the fake verbs fabric standing in
// for the NICs. Every collective is checked against a reference on every rank, and a
// failed completion in the middle of a call must end it on every rank. The random call
// sequences of collectives-sequences run here too, and a rank that sends and destroys
// its communicator at once must still deliver.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "collective.h"
#include "fake_verbs.hpp"
#include "tests/unit/collectives/harness.hpp"
#include "tests/unit/collectives/sequences_threads.hpp"
#include "transport/net/ib/verbs_ops.hpp"

namespace {

using testing_coll::Job;
using testing_coll::ScopedEnv;
namespace fake = coll::net::ib::fake;

// One fabric for the whole program: the library keeps the backend it initialised (and
// with it this fabric's verbs) for the life of the process.
fake::FakeFabric& fabric() {
  static auto* f = [] {
    auto* fab = new fake::FakeFabric({fake::ibDevice("mlx5_0"), fake::ibDevice("mlx5_1")});
    coll::net::ib::setVerbsOpsForTesting(fab->ops());
    return fab;
  }();
  return *f;
}

class IbCollectives : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { fabric(); }
  ScopedEnv transport_{"COLL_TRANSPORT", "net"};
  ScopedEnv net_{"COLL_NET", "ib"};
  ScopedEnv plugin_{"COLL_NET_PLUGIN", nullptr};
  ScopedEnv timeout_{"COLL_TIMEOUT", "60"};
};

TEST_P(IbCollectives, EveryCollectiveMatchesTheReference) {
  const int n = GetParam();
  Job job(n);
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
}

INSTANTIATE_TEST_SUITE_P(Ranks, IbCollectives, ::testing::Values(2, 3, 4));

TEST(IbCollectivesFailure, AFailedCompletionEndsTheCallOnEveryRank) {
  fabric();
  ScopedEnv transport("COLL_TRANSPORT", "net"), net("COLL_NET", "ib"), plugin("COLL_NET_PLUGIN", nullptr),
      timeout("COLL_TIMEOUT", "60");
  Job job(3);
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

// The random call sequences (tests/unit/collectives/sequences.hpp) over the backend, and
// a sender that leaves before its receivers post.
class IbSequences : public IbCollectives {};

TEST_F(IbSequences, FourRanks) { testing_coll::seq::runSequence(4, 6, 200); }
TEST_F(IbSequences, ARankThatLeftEarlyStillDelivers) { testing_coll::seq::checkLeftEarly(); }

}  // namespace
