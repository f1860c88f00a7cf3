// A peer that stops participating or aborts turns into an error on the survivors within
// COLL_TIMEOUT, never a hang.
#include <chrono>
#include <string>
#include <thread>

#include "harness.hpp"

using namespace testing_coll;
using Clock = std::chrono::steady_clock;

namespace {

TEST(Failures, SilentPeerTimesOut) {
  Job job(2, {{"COLL_TIMEOUT", "2"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // never joins the call
      return;
    }
    std::vector<float> x(1000, 1.f);
    auto t0 = Clock::now();
    collResult_t rc = collAllReduce(x.data(), x.data(), x.size(), collFloat32, collSum, c, nullptr);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(rc, collTimeout) << collGetLastError(c);
    EXPECT_GE(secs, 1.5);
    EXPECT_LT(secs, 5.0);
    // The communicator stays failed: later calls fail fast with the same error.
    EXPECT_NE(collAllReduce(x.data(), x.data(), 1, collFloat32, collSum, c, nullptr), collSuccess);
    collResult_t async;
    EXPECT_EQ(collCommGetAsyncError(c, &async), collSuccess);
    EXPECT_EQ(async, collTimeout);
  });
  job.run([&](int r, collComm_t c) {
    EXPECT_EQ(collCommAbort(c), collSuccess);
    job.forget(r);
  });
}

TEST(Failures, AbortedPeerIsReportedQuickly) {
  Job job(3, {{"COLL_TIMEOUT", "30"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_EQ(collCommAbort(c), collSuccess);
      job.forget(r);
      return;
    }
    std::vector<float> x(1 << 16, 1.f);
    auto t0 = Clock::now();
    collResult_t rc = collAllReduce(x.data(), x.data(), x.size(), collFloat32, collSum, c, nullptr);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(rc, collRemoteError) << collGetLastError(c);
    EXPECT_LT(secs, 10.0) << "the abort should be noticed long before COLL_TIMEOUT";
    EXPECT_EQ(collCommAbort(c), collSuccess);
    job.forget(r);
  });
}

TEST(Failures, NonblockingFailureSurfacesInWait) {
  Job job(2, {{"COLL_TIMEOUT", "2"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      return;
    }
    float x = 1;
    collRequest_t req;
    ASSERT_EQ(collIallReduce(&x, &x, 1, collFloat32, collSum, c, &req), collSuccess);
    EXPECT_EQ(collWait(&req), collTimeout) << collGetLastError(c);
    EXPECT_EQ(req, nullptr);
  });
  job.run([&](int r, collComm_t c) {
    EXPECT_EQ(collCommAbort(c), collSuccess);
    job.forget(r);
  });
}

// Nonblocking sends and receives posted after the communicator failed must fail in
// collWait at once, whichever way the worker learns of it: they used to be dropped when
// posting on a failed link threw, and collWait then waited 2 x COLL_TIMEOUT.
TEST(Failures, NonblockingP2PAfterFailureFailsAtOnce) {
  Job job(2, {{"COLL_TIMEOUT", "10"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_EQ(collCommAbort(c), collSuccess);
      job.forget(r);
      return;
    }
    std::vector<float> x(1 << 16, 1.f);
    EXPECT_EQ(collAllReduce(x.data(), x.data(), x.size(), collFloat32, collSum, c, nullptr), collRemoteError)
        << collGetLastError(c);
    float s = 1, got = 0;
    collRequest_t send = nullptr, recv = nullptr;
    auto t0 = Clock::now();
    ASSERT_EQ(collIsend(&s, 1, collFloat32, 1, c, &send), collSuccess) << collGetLastError(c);
    ASSERT_EQ(collIrecv(&got, 1, collFloat32, 1, c, &recv), collSuccess) << collGetLastError(c);
    EXPECT_EQ(collWait(&send), collRemoteError);
    EXPECT_EQ(collWait(&recv), collRemoteError);
    EXPECT_NE(std::string(collGetLastError(c)).find("earlier error"), std::string::npos) << collGetLastError(c);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_LT(secs, 5.0) << "the requests waited instead of failing";
    EXPECT_EQ(collCommAbort(c), collSuccess);
    job.forget(r);
  });
}

}  // namespace
