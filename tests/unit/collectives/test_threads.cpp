// Misuse that multi-threaded framework code produces: two threads on one communicator,
// one thread destroying or aborting a communicator another is blocked on, requests
// waited for twice, mismatched groups and odd splits. Each must end in a clear error
// code (or a correct result), never a crash, a hang or a wrong result.
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "harness.hpp"

using namespace testing_coll;
using Clock = std::chrono::steady_clock;

namespace {

bool mentions(const char* text, const char* word) { return std::string(text).find(word) != std::string::npos; }

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// A second thread issuing a collective on a communicator while another thread's
// collective on it is still running is refused at once: run behind it instead, the two
// threads' calls may pair up differently on different ranks (rank 0's thread A with rank
// 1's thread B) and return each other's data as success.
TEST(Threads, SecondThreadOnOneCommIsRefused) {
  Job job(2, {{"COLL_TIMEOUT", "20"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    if (r == 1) {
      sleepMs(600);  // rank 0's first call waits for this one
      float x = 2;
      EXPECT_EQ(collAllReduce(&x, &x, 1, collFloat32, collSum, c, nullptr), collSuccess) << collGetLastError(c);
      EXPECT_EQ(x, 3.f);
      return;
    }
    float a = 1;
    std::thread first([&] {
      EXPECT_EQ(collAllReduce(&a, &a, 1, collFloat32, collSum, c, nullptr), collSuccess) << collGetLastError(c);
    });
    sleepMs(200);
    float b = 100;
    auto t0 = Clock::now();
    collResult_t rc = collAllReduce(&b, &b, 1, collFloat32, collSum, c, nullptr);
    EXPECT_LT(since(t0), 0.3) << "the second thread should be refused, not queued";
    EXPECT_EQ(rc, collInvalidUsage);
    EXPECT_TRUE(mentions(collGetLastError(nullptr), "another thread")) << collGetLastError(nullptr);
    EXPECT_EQ(b, 100.f);
    first.join();
    EXPECT_EQ(a, 3.f);
  });
  // The refusal left the communicator usable.
  job.run([&](int r, collComm_t c) {
    float x = static_cast<float>(r);
    EXPECT_EQ(collAllReduce(&x, &x, 1, collFloat32, collSum, c, nullptr), collSuccess) << collGetLastError(c);
    EXPECT_EQ(x, 1.f);
  });
}

// Two threads waiting on one request: one gets the result and releases the request, the
// other is told it is gone (it used to release it a second time: a double free).
TEST(Threads, TwoThreadsWaitingOnOneRequest) {
  Job job(2, {{"COLL_TIMEOUT", "20"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    if (r == 1) sleepMs(300);  // both waiters on rank 0 are inside collWait by then
    collRequest_t req = nullptr;
    ASSERT_EQ(collIbarrier(c, &req), collSuccess) << collGetLastError(c);
    if (r == 1) {
      EXPECT_EQ(collWait(&req), collSuccess);
      return;
    }
    collRequest_t copy = req;
    collResult_t rc2 = collSuccess;
    std::thread other([&] { rc2 = collWait(&copy); });
    collResult_t rc1 = collWait(&req);
    other.join();
    // Exactly one of them had the request.
    EXPECT_TRUE((rc1 == collSuccess && rc2 == collInvalidUsage) || (rc2 == collSuccess && rc1 == collInvalidUsage))
        << rc1 << " " << rc2;
  });
}

// Rank 0 runs block(c) on a second thread; rank 1 never takes part. collCommAbort from
// rank 0's first thread must wake the blocked one with an error at once (well before
// COLL_TIMEOUT), wherever it waits.
void abortWakesBlockedThread(const std::function<collResult_t(collComm_t)>& block) {
  Job job(2, {{"COLL_TIMEOUT", "20"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    if (r == 1) {
      sleepMs(1500);  // never joins; aborts its own after rank 0 did
      EXPECT_EQ(collCommAbort(c), collSuccess);
      job.forget(r);
      return;
    }
    collResult_t rc = collSuccess;
    double secs = 0;
    std::thread blocked([&] {
      auto t0 = Clock::now();
      rc = block(c);
      secs = since(t0);
    });
    sleepMs(300);
    EXPECT_EQ(collCommAbort(c), collSuccess);
    job.forget(r);
    blocked.join();
    EXPECT_NE(rc, collSuccess);
    EXPECT_LT(secs, 2.0);
  });
}

TEST(Threads, AbortWakesThreadBlockedInCollective) {
  std::vector<float> x(1000, 1.f);
  abortWakesBlockedThread(
      [&](collComm_t c) { return collAllReduce(x.data(), x.data(), x.size(), collFloat32, collSum, c, nullptr); });
}

TEST(Threads, AbortWakesThreadBlockedInWait) {
  float x = 1;
  abortWakesBlockedThread([&](collComm_t c) {
    collRequest_t req = nullptr;
    collResult_t rc = collIallReduce(&x, &x, 1, collFloat32, collSum, c, &req);
    return rc == collSuccess ? collWait(&req) : rc;
  });
}

// collCommDestroy from another thread while a collective waits for a peer that never
// comes: both return within the timeout, no crash.
TEST(Threads, DestroyWhileAnotherThreadIsBlocked) {
  Job job(2, {{"COLL_TIMEOUT", "2"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    if (r == 1) {
      sleepMs(3000);
      EXPECT_EQ(collCommAbort(c), collSuccess);
      job.forget(r);
      return;
    }
    float x = 1;
    collResult_t rc = collSuccess;
    double secs = 0;
    std::thread blocked([&] {
      auto t0 = Clock::now();
      rc = collAllReduce(&x, &x, 1, collFloat32, collSum, c, nullptr);
      secs = since(t0);
    });
    sleepMs(300);
    auto t0 = Clock::now();
    collResult_t drc = collCommDestroy(c);
    double dsecs = since(t0);
    job.forget(r);
    blocked.join();
    EXPECT_NE(rc, collSuccess);
    EXPECT_LT(secs, 2.9);
    EXPECT_EQ(drc, collSuccess) << collGetLastError(nullptr);
    EXPECT_LT(dsecs, 2.9);
  });
}

// Two threads tearing one communicator down at once (a watchdog's collCommAbort racing
// the main thread's collCommDestroy): one does it, the other gets collInvalidUsage. Both
// used to pass the liveness check and free it twice.
TEST(Threads, DestroyAndAbortRacingOnOneComm) {
  for (int i = 0; i < 40; ++i) {
    Job job(1);
    ASSERT_TRUE(job.ok());
    collComm_t c = job.comm(0);
    job.forget(0);
    std::atomic<int> ready{0};
    collResult_t rd = collSuccess, ra = collSuccess;
    auto go = [&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
    };
    std::thread destroyer([&] {
      go();
      rd = collCommDestroy(c);
    });
    go();
    ra = collCommAbort(c);
    destroyer.join();
    ASSERT_TRUE((rd == collSuccess && ra == collInvalidUsage) || (ra == collSuccess && rd == collInvalidUsage))
        << "iteration " << i << ": destroy " << rd << ", abort " << ra;
  }
}

// A thread calling into a communicator over and over while another destroys or aborts
// it: every call either does its work or returns collInvalidUsage (or, under an abort,
// collRemoteError), and destroy frees the
// handle only once no call that found it live is still using it (before, a call that had
// just passed the liveness check went on to read the freed communicator; AddressSanitizer
// reported it here).
TEST(Threads, CallsRacingDestroyAndAbort) {
  for (int i = 0; i < 60; ++i) {
    Job job(1);
    ASSERT_TRUE(job.ok());
    collComm_t c = job.comm(0);
    std::atomic<bool> started{false};
    int bad = 0;
    std::thread user([&] {
      for (int k = 0;; ++k) {
        float x = 1, y = 0;
        int n = 0;
        collResult_t rc;
        switch (k % 4) {
          case 0: rc = collCommCount(c, &n); break;
          case 1: rc = collAllReduce(&x, &y, 1, collFloat32, collSum, c, nullptr); break;
          case 2: {
            collRequest_t req = nullptr;
            rc = collIallReduce(&x, &y, 1, collFloat32, collSum, c, &req);
            if (rc == collSuccess) rc = collWait(&req);
            break;
          }
          default: rc = collCommUserRank(c, &n); break;
        }
        (void)collGetLastError(c);
        started.store(true);
        if (rc == collInvalidUsage) return;
        // An abort that lands inside the call fails it as aborted.
        if (rc == collRemoteError && i % 2) continue;
        if (rc != collSuccess || (k % 4 == 1 && y != 1.f)) ++bad;
      }
    });
    while (!started.load()) std::this_thread::yield();
    collResult_t rc = i % 2 ? collCommAbort(c) : collCommDestroy(c);
    job.forget(0);
    user.join();
    EXPECT_EQ(rc, collSuccess) << collGetLastError(nullptr);
    EXPECT_EQ(bad, 0) << "iteration " << i;
  }
}

// Aborting while nonblocking sends wait for a receiver that never posts: the requests
// fail as aborted, nothing touches the released links.
TEST(Threads, AbortWithNonblockingSendsPending) {
  Job job(2, {{"COLL_TIMEOUT", "20"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    if (r == 1) {
      sleepMs(500);
      EXPECT_EQ(collCommAbort(c), collSuccess);
      job.forget(r);
      return;
    }
    std::vector<float> x(1 << 20, 1.f);
    collRequest_t a = nullptr, b = nullptr;
    ASSERT_EQ(collIsend(x.data(), x.size(), collFloat32, 1, c, &a), collSuccess);
    ASSERT_EQ(collIsend(x.data(), x.size(), collFloat32, 1, c, &b), collSuccess);
    sleepMs(100);
    EXPECT_EQ(collCommAbort(c), collSuccess);
    job.forget(r);
    EXPECT_NE(collWait(&a), collSuccess);
    EXPECT_NE(collWait(&b), collSuccess);
  });
}

// Destroying a communicator with nonblocking requests outstanding: they finish (the peers
// take part) and can be waited for afterwards.
TEST(Threads, DestroyWithOutstandingRequests) {
  Job job(2, {{"COLL_TIMEOUT", "20"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    std::vector<float> x(1 << 14, 1.f);
    collRequest_t a = nullptr, b = nullptr;
    ASSERT_EQ(collIallReduce(x.data(), x.data(), x.size(), collFloat32, collSum, c, &a), collSuccess);
    ASSERT_EQ(collIbarrier(c, &b), collSuccess);
    EXPECT_EQ(collCommDestroy(c), collSuccess) << collGetLastError(nullptr);
    job.forget(r);
    collResult_t ra = collWait(&a), rb = collWait(&b);
    EXPECT_TRUE(ra == collSuccess || ra == collInvalidUsage) << ra;
    EXPECT_TRUE(rb == collSuccess || rb == collInvalidUsage) << rb;
    if (ra == collSuccess) {
      EXPECT_EQ(x.back(), 2.f);
    }
  });
}

// Group misuse: End without Start, a collective on a destroyed communicator inside a
// group, a communicator destroyed between its deferred calls and collGroupEnd.
TEST(Threads, GroupMisuse) {
  EXPECT_EQ(collGroupEnd(), collInvalidUsage);
  Job job(1);
  ASSERT_TRUE(job.ok());
  collComm_t c = job.comm(0);
  float x = 1, y = 0;
  // Nested groups: only the outermost End runs the calls.
  ASSERT_EQ(collGroupStart(), collSuccess);
  ASSERT_EQ(collGroupStart(), collSuccess);
  ASSERT_EQ(collAllReduce(&x, &y, 1, collFloat32, collSum, c, nullptr), collSuccess);
  ASSERT_EQ(collGroupEnd(), collSuccess);
  EXPECT_EQ(y, 0.f);
  ASSERT_EQ(collGroupEnd(), collSuccess) << collGetLastError(c);
  EXPECT_EQ(y, 1.f);
  EXPECT_EQ(collGroupEnd(), collInvalidUsage);

  // Destroyed inside the group, before End.
  ASSERT_EQ(collGroupStart(), collSuccess);
  ASSERT_EQ(collAllReduce(&x, &y, 1, collFloat32, collSum, c, nullptr), collSuccess);
  ASSERT_EQ(collCommDestroy(c), collSuccess);
  job.forget(0);
  EXPECT_EQ(collAllReduce(&x, &y, 1, collFloat32, collSum, c, nullptr), collInvalidUsage);
  EXPECT_EQ(collGroupEnd(), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(nullptr), "not a live communicator")) << collGetLastError(nullptr);
  // The group is over: the next call runs at once.
  EXPECT_EQ(collGroupEnd(), collInvalidUsage);
}

// A rank passing a bad color gets collInvalidArgument, and so do the others, at once:
// they used to wait in the split's exchange for it until COLL_TIMEOUT.
TEST(Threads, SplitWithBadColorOnOneRankFailsEverywhere) {
  Job job(3, {{"COLL_TIMEOUT", "10"}});
  ASSERT_TRUE(job.ok());
  std::vector<collResult_t> rc(3, collSuccess);
  std::vector<double> secs(3);
  job.run([&](int r, collComm_t c) {
    collComm_t sub = reinterpret_cast<collComm_t>(&rc);
    auto t0 = Clock::now();
    rc[r] = collCommSplit(c, r == 1 ? -5 : 0, 0, &sub);
    secs[r] = since(t0);
    EXPECT_EQ(sub, nullptr);
    if (sub && sub != reinterpret_cast<collComm_t>(&rc)) collCommDestroy(sub);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(rc[r], collInvalidArgument) << "rank " << r;
    EXPECT_LT(secs[r], 5.0) << "rank " << r;
  }
  EXPECT_TRUE(mentions(collGetLastError(job.comm(0)), "color")) << collGetLastError(job.comm(0));
  // Still usable.
  job.run([&](int r, collComm_t c) {
    float x = 1;
    EXPECT_EQ(collAllReduce(&x, &x, 1, collFloat32, collSum, c, nullptr), collSuccess) << collGetLastError(c);
    EXPECT_EQ(x, 3.f);
  });
}

// Every rank the same color and key, negative keys, every rank NOCOLOR.
TEST(Threads, SplitEdgeColorsAndKeys) {
  Job job(3);
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    collComm_t all = nullptr;
    ASSERT_EQ(collCommSplit(c, 7, 0, &all), collSuccess) << collGetLastError(c);
    int rank = -1, n = -1;
    EXPECT_EQ(collCommUserRank(all, &rank), collSuccess);
    EXPECT_EQ(collCommCount(all, &n), collSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(n, 3);
    collComm_t rev = nullptr;
    ASSERT_EQ(collCommSplit(c, 2147483647, -r, &rev), collSuccess) << collGetLastError(c);
    EXPECT_EQ(collCommUserRank(rev, &rank), collSuccess);
    EXPECT_EQ(rank, 2 - r);
    collComm_t none = reinterpret_cast<collComm_t>(&rank);
    ASSERT_EQ(collCommSplit(c, COLL_SPLIT_NOCOLOR, 0, &none), collSuccess) << collGetLastError(c);
    EXPECT_EQ(none, nullptr);
    EXPECT_EQ(collCommDestroy(all), collSuccess);
    EXPECT_EQ(collCommDestroy(rev), collSuccess);
  });
}

}  // namespace
