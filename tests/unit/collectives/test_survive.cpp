// Revoke, shrink and grow with ranks as threads (one process, so nobody can be found
// dead here; tests/mp/survive_test.py kills processes): a revoke stops calls in flight on
// every rank, bad arguments are refused at once on the rank that passed them, and a
// shrink without exclusions or a grow by joining threads gives working communicators.
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

using namespace testing_coll;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Sum of (rank + 1) over n ranks, checked on every rank.
void expectSum(collComm_t c, int n) {
  int rank = -1;
  ASSERT_EQ(collCommUserRank(c, &rank), collSuccess);
  std::vector<int32_t> v(1000, rank + 1);
  ASSERT_EQ(collAllReduce(v.data(), v.data(), v.size(), collInt32, collSum, c, nullptr), collSuccess)
      << collGetLastError(c);
  for (int32_t x : v) ASSERT_EQ(x, n * (n + 1) / 2);
}

TEST(Survive, ErrorStringNamesRevoked) {
  EXPECT_STRNE(collGetErrorString(collRevoked), collGetErrorString(collNumResults));
}

TEST(Survive, RevokeStopsCallsInFlightOnEveryRank) {
  Job job(4, {{"COLL_TIMEOUT", "30"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    std::vector<float> x(4096, 1.f);
    const auto t0 = Clock::now();
    if (r == 2) {  // never joins the call: revokes instead
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_EQ(collCommRevoke(c), collSuccess) << collGetLastError(c);
      EXPECT_EQ(collCommRevoke(c), collSuccess);  // again: no-op
    } else {
      EXPECT_EQ(collAllReduce(x.data(), x.data(), x.size(), collFloat32, collSum, c, nullptr), collRevoked)
          << collGetLastError(c);
      EXPECT_LT(secondsSince(t0), 5.0);  // not COLL_TIMEOUT
      EXPECT_NE(std::string(collGetLastError(c)).find("revoked by rank 2"), std::string::npos) << collGetLastError(c);
    }
    // Every later call, blocking or not, fails at once the same way.
    EXPECT_EQ(collBroadcast(x.data(), x.data(), 4, collFloat32, 0, c, nullptr), collRevoked);
    collRequest_t req = nullptr;
    if (collIallReduce(x.data(), x.data(), 4, collFloat32, collSum, c, &req) == collSuccess)
      EXPECT_EQ(collWait(&req), collRevoked);
    collResult_t async;
    EXPECT_EQ(collCommGetAsyncError(c, &async), collSuccess);
    EXPECT_EQ(async, collRevoked);
    // Nobody died: no failed ranks, and a grow is refused on the revoked communicator.
    int ranks[4], n = -1;
    EXPECT_EQ(collCommGetFailedRanks(c, ranks, 4, &n), collSuccess) << collGetLastError(c);
    EXPECT_EQ(n, 0);
    EXPECT_STREQ(collCommFailureReason(c, 1), "");
    collComm_t g = nullptr;
    EXPECT_EQ(collCommGrow(c, 1, &g), collRevoked);
    EXPECT_EQ(g, nullptr);
    // A shrink that excludes nobody rebuilds the communicator.
    collComm_t s = nullptr;
    ASSERT_EQ(collCommShrink(c, nullptr, 0, &s), collSuccess) << collGetLastError(c);
    int size = 0, rank = -1;
    EXPECT_EQ(collCommCount(s, &size), collSuccess);
    EXPECT_EQ(collCommUserRank(s, &rank), collSuccess);
    EXPECT_EQ(size, 4);
    EXPECT_EQ(rank, r);
    expectSum(s, 4);
    EXPECT_EQ(collCommDestroy(s), collSuccess);
  });
}

TEST(Survive, BadShrinkArgumentsFailAtOnce) {
  Job job(3, {{"COLL_TIMEOUT", "30"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    collComm_t s = nullptr;
    const int self[] = {r};
    EXPECT_EQ(collCommShrink(c, self, 1, &s), collInvalidArgument);
    EXPECT_NE(std::string(collGetLastError(c)).find("cannot exclude itself"), std::string::npos);
    const int outside[] = {3};
    EXPECT_EQ(collCommShrink(c, outside, 1, &s), collInvalidArgument);
    const int other = (r + 1) % 3;
    const int twice[] = {other, other};
    EXPECT_EQ(collCommShrink(c, twice, 2, &s), collInvalidArgument);
    EXPECT_EQ(collCommShrink(c, nullptr, 1, &s), collInvalidArgument);
    EXPECT_EQ(collCommShrink(c, nullptr, -1, &s), collInvalidArgument);
    EXPECT_EQ(collCommShrink(c, nullptr, 0, nullptr), collInvalidArgument);
    // A rank that is alive (every rank here: they are threads of this process).
    const auto t0 = Clock::now();
    const int live[] = {other};
    EXPECT_EQ(collCommShrink(c, live, 1, &s), collInvalidArgument);
    EXPECT_NE(std::string(collGetLastError(c)).find("alive"), std::string::npos) << collGetLastError(c);
    EXPECT_LT(secondsSince(t0), 5.0);
    EXPECT_EQ(s, nullptr);
    int n = 0;
    EXPECT_EQ(collCommGetFailedRanks(c, nullptr, 0, nullptr), collInvalidArgument);
    EXPECT_EQ(collCommGetFailedRanks(c, nullptr, 2, &n), collInvalidArgument);
    EXPECT_EQ(collCommGetFailedRanks(c, nullptr, -1, &n), collInvalidArgument);
    // The communicator is still fine after all of that.
    expectSum(c, 3);
  });
}

TEST(Survive, BadGrowArgumentsFailAtOnce) {
  Job job(2);
  ASSERT_TRUE(job.ok());
  job.run([&](int, collComm_t c) {
    collComm_t g = nullptr;
    EXPECT_EQ(collCommGrow(c, 0, &g), collInvalidArgument);
    EXPECT_EQ(collCommGrow(c, -3, &g), collInvalidArgument);
    EXPECT_EQ(collCommGrow(c, 65535, &g), collInvalidArgument);
    EXPECT_EQ(collCommGrow(c, 1, nullptr), collInvalidArgument);
    EXPECT_EQ(collCommGetGrowId(c, nullptr), collInvalidArgument);
    EXPECT_EQ(g, nullptr);
    expectSum(c, 2);
  });
}

TEST(Survive, GrowByJoiningRanks) {
  Job job(2, {{"COLL_TIMEOUT", "30"}});
  ASSERT_TRUE(job.ok());
  collUniqueId id0, id1;
  ASSERT_EQ(collCommGetGrowId(job.comm(0), &id0), collSuccess);
  ASSERT_EQ(collCommGetGrowId(job.comm(1), &id1), collSuccess);
  EXPECT_EQ(memcmp(&id0, &id1, sizeof id0), 0);  // every rank publishes the same id
  std::vector<collComm_t> grown(5, nullptr);
  std::vector<std::thread> joiners;
  for (int j = 2; j < 5; ++j)  // joiners start before the grow is called
    joiners.emplace_back([&, j] {
      EXPECT_EQ(initRank(&grown[j], 5, id0, j, {{"COLL_TIMEOUT", "30"}}), collSuccess) << collGetLastError(nullptr);
    });
  job.run([&](int r, collComm_t c) {
    EXPECT_EQ(collCommGrow(c, 3, &grown[r]), collSuccess) << collGetLastError(c);
    expectSum(c, 2);  // the old communicator still works
  });
  for (auto& t : joiners) t.join();
  std::vector<std::thread> all;
  for (int r = 0; r < 5; ++r)
    all.emplace_back([&, r] {
      ASSERT_NE(grown[r], nullptr);
      int size = 0, rank = -1;
      EXPECT_EQ(collCommCount(grown[r], &size), collSuccess);
      EXPECT_EQ(collCommUserRank(grown[r], &rank), collSuccess);
      EXPECT_EQ(size, 5);
      EXPECT_EQ(rank, r);
      expectSum(grown[r], 5);
      EXPECT_EQ(collCommDestroy(grown[r]), collSuccess);
    });
  for (auto& t : all) t.join();
}

}  // namespace
