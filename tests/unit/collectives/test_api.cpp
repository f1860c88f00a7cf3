// Nonblocking requests, groups of sends and receives, barrier, split, and forced algorithms.
#include <atomic>
#include <cstring>
#include <numeric>

#include "harness.hpp"

using namespace testing_coll;

namespace {

TEST(Api, NonblockingKeepIssueOrder) {
  Job job(3);
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    const size_t count = 100000;
    std::vector<std::vector<float>> bufs(4, std::vector<float>(count));
    std::vector<collRequest_t> reqs(4);
    for (int k = 0; k < 4; ++k) {
      std::fill(bufs[k].begin(), bufs[k].end(), static_cast<float>(r + k));
      ASSERT_EQ(collIallReduce(bufs[k].data(), bufs[k].data(), count, collFloat32, collSum, c, &reqs[k]), collSuccess);
    }
    // A blocking call issued behind them runs after them.
    float x = static_cast<float>(r), y = 0;
    ASSERT_EQ(collAllReduce(&x, &y, 1, collFloat32, collMax, c, nullptr), collSuccess);
    EXPECT_EQ(y, 2.f);
    for (int k = 0; k < 4; ++k) {
      int done = 0;
      while (!done) {
        collResult_t rc = collTest(&reqs[k], &done);
        ASSERT_TRUE(rc == collSuccess || rc == collInProgress) << collGetLastError(c);
      }
      EXPECT_EQ(reqs[k], nullptr);
      EXPECT_EQ(bufs[k][count - 1], static_cast<float>(3 * k + 3));
    }
    collRequest_t b;
    ASSERT_EQ(collIbarrier(c, &b), collSuccess);
    ASSERT_EQ(collWait(&b), collSuccess);
    EXPECT_EQ(b, nullptr);
  });
}

TEST(Api, GroupedSendRecvRingDoesNotDeadlock) {
  const int n = 4;
  Job job(n);
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    const size_t count = 1 << 20;  // large enough that unpaired blocking sends would stall
    std::vector<int32_t> out(count, r), in(count, -1), in2(count, -1);
    ASSERT_EQ(collGroupStart(), collSuccess);
    ASSERT_EQ(collSend(out.data(), count, collInt32, (r + 1) % n, c, nullptr), collSuccess);
    ASSERT_EQ(collSend(out.data(), count, collInt32, (r + n - 1) % n, c, nullptr), collSuccess);
    ASSERT_EQ(collRecv(in.data(), count, collInt32, (r + n - 1) % n, c, nullptr), collSuccess);
    ASSERT_EQ(collRecv(in2.data(), count, collInt32, (r + 1) % n, c, nullptr), collSuccess);
    ASSERT_EQ(collGroupEnd(), collSuccess) << collGetLastError(c);
    EXPECT_EQ(in[count - 1], (r + n - 1) % n);
    EXPECT_EQ(in2[0], (r + 1) % n);
    // Nonblocking point-to-point too.
    collRequest_t s, q;
    int32_t v = r * 10, got = -1;
    ASSERT_EQ(collIrecv(&got, 1, collInt32, (r + n - 1) % n, c, &q), collSuccess);
    ASSERT_EQ(collIsend(&v, 1, collInt32, (r + 1) % n, c, &s), collSuccess);
    ASSERT_EQ(collWait(&s), collSuccess);
    ASSERT_EQ(collWait(&q), collSuccess);
    EXPECT_EQ(got, ((r + n - 1) % n) * 10);
  });
}

TEST(Api, SplitByParity) {
  const int n = 5;
  Job job(n);
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    collComm_t sub = nullptr;
    int color = r == 4 ? COLL_SPLIT_NOCOLOR : r % 2;
    ASSERT_EQ(collCommSplit(c, color, -r, &sub), collSuccess) << collGetLastError(c);
    if (color == COLL_SPLIT_NOCOLOR) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    int size = 0, rank = -1;
    ASSERT_EQ(collCommCount(sub, &size), collSuccess);
    ASSERT_EQ(collCommUserRank(sub, &rank), collSuccess);
    EXPECT_EQ(size, 2);
    // key = -r orders higher old ranks first
    EXPECT_EQ(rank, (r == 0 || r == 1) ? 1 : 0);
    int32_t x = r, sum = 0;
    ASSERT_EQ(collAllReduce(&x, &sum, 1, collInt32, collSum, sub, nullptr), collSuccess);
    EXPECT_EQ(sum, color == 0 ? 0 + 2 : 1 + 3);
    EXPECT_EQ(collCommDestroy(sub), collSuccess);
  });
}

TEST(Api, ForcedAlgorithmsAgree) {
  for (const char* algo : {"allreduce:ring", "allreduce:rd"}) {
    Job job(3, {{"COLL_ALGO", algo}});
    ASSERT_TRUE(job.ok());
    job.run([&](int r, collComm_t c) {
      for (size_t count : {size_t(1), size_t(5), size_t(70000)}) {
        std::vector<int64_t> in(count), out(count);
        std::iota(in.begin(), in.end(), r);
        ASSERT_EQ(collAllReduce(in.data(), out.data(), count, collInt64, collSum, c, nullptr), collSuccess);
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], static_cast<int64_t>(3 * i + 3)) << algo;
      }
    });
  }
}

TEST(Api, BarrierAndQueries) {
  Job job(4);
  ASSERT_TRUE(job.ok());
  std::atomic<int> arrived{0};
  job.run([&](int r, collComm_t c) {
    int n = 0, me = -1;
    ASSERT_EQ(collCommCount(c, &n), collSuccess);
    ASSERT_EQ(collCommUserRank(c, &me), collSuccess);
    EXPECT_EQ(n, 4);
    EXPECT_EQ(me, r);
    arrived++;
    ASSERT_EQ(collBarrier(c), collSuccess);
    EXPECT_EQ(arrived.load(), 4);
    collResult_t async;
    ASSERT_EQ(collCommGetAsyncError(c, &async), collSuccess);
    EXPECT_EQ(async, collSuccess);
  });
}

}  // namespace
