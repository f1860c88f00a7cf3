// Zero-copy messages of the InfiniBand backend over the fake fabric: no CPU copy above
// the cut-over (from the counters), several QPs with shuffled delivery and truncation,
// receives posted before or after their send, the registration cache through the
// backend (hits, a freed and reused buffer, no page check possible, on-demand paging),
// registration failures and remote access errors that fail fast with their cause, and
// closing with writes in flight.
#include <sys/mman.h>

#include "ib_drive.hpp"
#include "transport/net/ib/ib_counters.hpp"

namespace coll::net::ib::test {
namespace {

using fake::FakeFabric;

class IbZcopy : public ::testing::Test {
 protected:
  void TearDown() override {
    auto c = fabric.live();
    EXPECT_EQ(c.qps + c.mrs + c.cqs + c.pds + c.contexts, 0);
    EXPECT_TRUE(fabric.misuse().empty()) << fabric.misuse().front();
  }
  FakeFabric fabric{{fake::ibDevice("mlx5_0"), fake::ibDevice("mlx5_1")}};
};

// A backend with the default tunables and a connection from device 0 to device 1.
class IbZcopyPair : public IbZcopy {
 protected:
  void SetUp() override {
    b = std::make_unique<Backend>(&fabric);
    ASSERT_EQ(b->rc, 0) << b->error();
    pr = connectPair(*b, 0, 1);
  }
  void TearDown() override {
    closePair(*b, pr);
    b.reset();
    IbZcopy::TearDown();
  }
  std::unique_ptr<Backend> b;
  Pair pr;
};

uint64_t sum(const std::vector<size_t>& v, size_t from) {
  uint64_t s = 0;
  for (size_t x : v)
    if (x >= from) s += x;
  return s;
}

TEST_F(IbZcopy, NoCopiesAboveTheCutOver) {
  const std::vector<size_t> sizes = {100, (64 << 10) - 1, 64 << 10, (64 << 10) + 1, (1 << 20) + 7, 3 << 20, 0};
  {
    Backend b(&fabric, {{"COLL_IB_CHUNK", "16K"}, {"COLL_IB_SLOTS", "8"}, {"COLL_IB_ZCOPY_MIN", "64K"}});
    ASSERT_EQ(b.rc, 0) << b.error();
    Pair pr = connectPair(b, 0, 1);
    auto msgs = makeMsgs(sizes, {}, 1);
    Stats st;
    driveBoth(b, pr, msgs, &st);
    checkMsgs(msgs);
    const uint64_t big = sum(sizes, 64 << 10), small = 100 + (64 << 10) - 1;
    for (void* ep : {pr.send, pr.recv}) {
      ByteCounts c = endpointCounts(ep);
      EXPECT_EQ(c.zcopyMsgs, 4u);
      EXPECT_EQ(c.eagerMsgs, 3u);
      EXPECT_EQ(c.zcopyBytes, big);
      EXPECT_EQ(c.copiedBytes, small) << "copied bytes beyond the eager messages' own";
    }
    EXPECT_EQ(fabric.traffic().writeBytes, big);
    EXPECT_EQ(contextSent(b.ctx).copiedBytes, small);
    EXPECT_EQ(contextReceived(b.ctx).zcopyBytes, big);
    closePair(b, pr);
  }
}

// Four QPs, cross-QP delivery in a random order, receives smaller and larger than their
// messages (a region the sender leaves unused when its message is eager), a receive of
// nothing for a zero-copy message.
TEST_F(IbZcopy, SeveralQpsShuffledWithTruncation) {
  fabric.setShuffle(11);
  Backend b(&fabric, {{"COLL_IB_QPS", "4"}, {"COLL_IB_CHUNK", "8K"}, {"COLL_IB_SLOTS", "4"}, {"COLL_IB_ZCOPY_MIN", "16K"}});
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 1);
  std::vector<size_t> sizes, caps;
  auto add = [&](size_t s, size_t c) {
    sizes.push_back(s);
    caps.push_back(c);
  };
  add(16 << 10, 16 << 10);
  add(100, 64 << 10);            // eager into a receive that offered a region
  add((16 << 10) + 1, 16 << 10);  // truncated by one
  add(50000, 0);                  // nothing kept
  add(3 * 4096 + 17, 3 * 4096 + 17);  // stripes shorter than four pages: some QPs write nothing
  add(5, 5);
  add(300000, 100000);
  add(20000, 1 << 20);  // the receive is larger
  for (int i = 0; i < 40; ++i) add(size_t(i * 7919 % 90000), size_t(i * 7919 % 90000));
  auto msgs = makeMsgs(sizes, caps, 2);
  Stats st;
  driveBoth(b, pr, msgs, &st);
  checkMsgs(msgs);
  ByteCounts c = endpointCounts(pr.send);
  EXPECT_GT(c.zcopyMsgs, 20u);
  EXPECT_EQ(fabric.traffic().writesWithImm, 4 * c.zcopyMsgs) << "one write with immediate per QP per message";
  closePair(b, pr);
}

TEST_F(IbZcopy, ReceivePostedBeforeOrAfterItsSend) {
  Backend b(&fabric, {{"COLL_IB_QPS", "2"}, {"COLL_IB_ZCOPY_MIN", "4K"}});
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 1);
  for (bool recvFirst : {true, false, true}) {
    auto src = randomBytes(200000, recvFirst), dst = std::vector<uint8_t>(200000);
    void *s = nullptr, *r = nullptr;
    if (recvFirst) {
      ASSERT_EQ(b.p->irecv(pr.recv, dst.data(), dst.size(), &r), 0) << b.error();
    }
    ASSERT_EQ(b.p->isend(pr.send, src.data(), src.size(), 9, &s), 0) << b.error();
    int sent = 0;
    for (int i = 0; i < 5 && !sent; ++i) ASSERT_EQ(b.p->test(s, &sent, nullptr, nullptr), 0) << b.error();
    if (!recvFirst) {
      EXPECT_EQ(sent, 0) << "a zero-copy send done before its receive is posted";
      ASSERT_EQ(b.p->irecv(pr.recv, dst.data(), dst.size(), &r), 0) << b.error();
    }
    // The sender must make progress too: it writes once the region has come.
    size_t size = 0;
    uint64_t tag = 0;
    int got = 0;
    for (auto end = Clock::now() + std::chrono::seconds(20); (!got || !sent) && Clock::now() < end;) {
      if (!got) {
        ASSERT_EQ(b.p->test(r, &got, &size, &tag), 0) << b.error();
      }
      if (!sent) {
        ASSERT_EQ(b.p->test(s, &sent, nullptr, nullptr), 0) << b.error();
      }
    }
    ASSERT_TRUE(got && sent);
    EXPECT_EQ(size, src.size());
    EXPECT_EQ(tag, 9u);
    EXPECT_EQ(src, dst);
  }
  EXPECT_EQ(endpointCounts(pr.recv).zcopyMsgs, 3u);
  closePair(b, pr);
}

// Many zero-copy sends at once, their receives posted one at a time, each only after the
// one before has completed (as an algorithm whose next step needs the last one's data):
// the headers of later messages must not take the credits an earlier one still needs.
TEST_F(IbZcopy, ReceivesPostedOneAtATimeBehindManySends) {
  Backend b(&fabric, {{"COLL_IB_SLOTS", "4"}, {"COLL_IB_CHUNK", "4K"}, {"COLL_IB_ZCOPY_MIN", "4K"}});
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 1);
  constexpr int kMsgs = 12;
  std::vector<std::vector<uint8_t>> src, dst;
  std::vector<void*> sreq(kMsgs, nullptr);
  std::vector<int> sent(kMsgs, 0);
  for (int i = 0; i < kMsgs; ++i) {
    src.push_back(randomBytes(64 << 10, 20 + i));
    dst.emplace_back(64 << 10);
    ASSERT_EQ(b.p->isend(pr.send, src[i].data(), src[i].size(), uint64_t(i), &sreq[i]), 0) << b.error();
    ASSERT_NE(sreq[i], nullptr);
  }
  auto pollSends = [&] {
    for (int i = 0; i < kMsgs; ++i)
      if (!sent[i]) {
        ASSERT_EQ(b.p->test(sreq[i], &sent[i], nullptr, nullptr), 0) << b.error();
      }
  };
  for (int i = 0; i < kMsgs; ++i) {
    void* r = nullptr;
    ASSERT_EQ(b.p->irecv(pr.recv, dst[i].data(), dst[i].size(), &r), 0) << b.error();
    int got = 0;
    for (auto end = Clock::now() + std::chrono::seconds(10); !got && Clock::now() < end;) {
      ASSERT_EQ(b.p->test(r, &got, nullptr, nullptr), 0) << b.error();
      pollSends();
    }
    ASSERT_TRUE(got) << "receive " << i << " never completed: the sender is stuck";
    EXPECT_EQ(src[i], dst[i]) << i;
  }
  for (auto end = Clock::now() + std::chrono::seconds(10); std::count(sent.begin(), sent.end(), 0) && Clock::now() < end;)
    pollSends();
  EXPECT_EQ(std::count(sent.begin(), sent.end(), 1), kMsgs);
  closePair(b, pr);
}

// One round trip of `src` into `dst` over pr.
void roundTrip(const Backend& b, Pair& pr, const uint8_t* src, uint8_t* dst, size_t n) {
  void *s = nullptr, *r = nullptr;
  ASSERT_EQ(b.p->irecv(pr.recv, dst, n, &r), 0) << b.error();
  ASSERT_EQ(b.p->isend(pr.send, src, n, 1, &s), 0) << b.error();
  ASSERT_EQ(waitRequest(b, r), 0) << b.error();
  ASSERT_EQ(waitRequest(b, s), 0) << b.error();
}

TEST_F(IbZcopyPair, RegistrationsAreReused) {
  auto src = randomBytes(1 << 20, 3);
  std::vector<uint8_t> dst(src.size());
  for (int i = 0; i < 5; ++i) roundTrip(*b, pr, src.data(), dst.data(), src.size());
  EXPECT_EQ(src, dst);
  for (int dev : {0, 1}) {
    CacheStats s = contextCacheStats(b->ctx, dev);
    EXPECT_EQ(s.misses, 1u) << "device " << dev;
    EXPECT_EQ(s.hits, 4u) << "device " << dev;
    EXPECT_EQ(s.entries, 1u) << "device " << dev;
    EXPECT_EQ(s.invalidated, 0u);
  }
}

// The classic stale-registration bug, on both sides: a buffer freed and its address
// reused by a new mapping with other pages. The cache must notice, or the receiver's
// data would land in the old pages and the sender would send the old ones.
TEST_F(IbZcopyPair, FreedAndReusedBuffersAreRegisteredAgain) {
  const size_t n = 1 << 20;
  auto map = [&](void* at) {
    void* p = mmap(at, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    return static_cast<uint8_t*>(p == MAP_FAILED ? nullptr : p);
  };
  uint8_t* src = map(nullptr);
  uint8_t* dst = map(nullptr);
  ASSERT_TRUE(src && dst);
  auto v1 = randomBytes(n, 4), v2 = randomBytes(n, 5);
  memcpy(src, v1.data(), n);
  roundTrip(*b, pr, src, dst, n);
  EXPECT_EQ(memcmp(dst, v1.data(), n), 0);
  // Free both and map again at the same addresses: new pages.
  ASSERT_EQ(munmap(src, n), 0);
  ASSERT_EQ(munmap(dst, n), 0);
  uint8_t* src2 = map(src);
  uint8_t* dst2 = map(dst);
  if (src2 != src || dst2 != dst) {
    if (src2) munmap(src2, n);
    if (dst2) munmap(dst2, n);
      GTEST_SKIP() << "the addresses were taken before they could be reused";
  }
  fabric.replacePages(src, n);
  fabric.replacePages(dst, n);
  memcpy(src, v2.data(), n);
  roundTrip(*b, pr, src, dst, n);
  EXPECT_EQ(memcmp(dst, v2.data(), n), 0) << "a stale registration was used";
  for (int dev : {0, 1}) EXPECT_EQ(contextCacheStats(b->ctx, dev).invalidated, 1u) << "device " << dev;
  munmap(src, n);
  munmap(dst, n);
}

TEST_F(IbZcopy, WithoutPageFramesEveryTransferRegisters) {
  fabric.setFramesReadable(false);
  Backend b(&fabric);
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 1);
  auto src = randomBytes(256 << 10, 6);
  std::vector<uint8_t> dst(src.size());
  const int before = fabric.registrations();
  for (int i = 0; i < 3; ++i) {
    fabric.replacePages(dst.data(), dst.size());  // would be stale if kept
    roundTrip(b, pr, src.data(), dst.data(), src.size());
    EXPECT_EQ(src, dst);
    std::fill(dst.begin(), dst.end(), 0);
  }
  EXPECT_EQ(fabric.registrations() - before, 6) << "one per side per transfer";
  EXPECT_EQ(contextCacheStats(b.ctx, 1).hits, 0u);
  EXPECT_EQ(contextCacheStats(b.ctx, 1).entries, 0u);
  closePair(b, pr);
}

TEST(IbZcopyOdp, OnDemandPagingNeedsNoPageCheck) {
  fake::FakeDevice d0 = fake::ibDevice("mlx5_0"), d1 = fake::ibDevice("mlx5_1");
  d0.odp = d1.odp = true;
  FakeFabric fabric({d0, d1});
  {
    Backend b(&fabric);
    ASSERT_EQ(b.rc, 0) << b.error();
    Pair pr = connectPair(b, 0, 1);
    auto src = randomBytes(512 << 10, 7);
    std::vector<uint8_t> dst(src.size());
    for (int i = 0; i < 3; ++i) {
      fabric.replacePages(dst.data(), dst.size());
      std::fill(dst.begin(), dst.end(), 0);
      roundTrip(b, pr, src.data(), dst.data(), src.size());
      EXPECT_EQ(src, dst);
    }
    CacheStats s = contextCacheStats(b.ctx, 1);
    EXPECT_EQ(s.checks, 0u);
    EXPECT_EQ(s.hits, 2u);
    EXPECT_EQ(s.invalidated, 0u);
    closePair(b, pr);
  }
  EXPECT_TRUE(fabric.misuse().empty());
}

// The locked-memory limit: a send that cannot register fails at once with the cause and
// the fix; a receive that cannot fails, and its sender hears of it instead of waiting.
TEST_F(IbZcopyPair, RegistrationFailureNamesTheLimitAndNeverHangs) {
  auto src = randomBytes(1 << 20, 8);
  std::vector<uint8_t> dst(src.size());
  fabric.setPinLimit(1);  // nothing more may be pinned
  void* s = nullptr;
  EXPECT_NE(b->p->isend(pr.send, src.data(), src.size(), 1, &s), 0);
  EXPECT_TRUE(contains(b->error(), "InfiniBand mlx5_0:1: registering the send buffer (1 MiB at ")) << b->error();
  EXPECT_TRUE(contains(b->error(), "Cannot allocate memory")) << b->error();
  EXPECT_TRUE(contains(b->error(), "ulimit -l")) << b->error();
  EXPECT_TRUE(contains(b->error(), "COLL_IB_ZCOPY=0")) << b->error();
  // The sender registers (no limit), then the receiver cannot.
  fabric.setPinLimit(0);
  ASSERT_EQ(b->p->isend(pr.send, src.data(), src.size(), 1, &s), 0) << b->error();
  fabric.setPinLimit(1);
  void* r = nullptr;
  EXPECT_NE(b->p->irecv(pr.recv, dst.data(), dst.size(), &r), 0);
  EXPECT_TRUE(contains(b->error(), "registering the receive buffer")) << b->error();
  EXPECT_NE(waitRequest(*b, s, nullptr, nullptr, 5), 0);
  EXPECT_TRUE(contains(b->error(), "the receiver could not register its buffer for message 0")) << b->error();
  fabric.setPinLimit(0);
}

TEST_F(IbZcopyPair, IdleRegistrationsMakeRoomUnderThePinLimit) {
  std::vector<std::vector<uint8_t>> bufs;
  for (int i = 0; i < 3; ++i) bufs.push_back(randomBytes(1 << 20, 10 + i));
  std::vector<uint8_t> dst(1 << 20);
  roundTrip(*b, pr, bufs[0].data(), dst.data(), dst.size());
  // Room for one more buffer (page-rounded), not two: the third evicts an idle one.
  fabric.setPinLimit(fabric.pinned() + (1 << 20) + 8192);
  for (int round = 0; round < 2; ++round)
    for (auto& buf : bufs) {
      roundTrip(*b, pr, buf.data(), dst.data(), dst.size());
      EXPECT_EQ(buf, dst);
    }
  EXPECT_GT(contextCacheStats(b->ctx, 0).evicted, 0u);
  fabric.setPinLimit(0);
}

TEST_F(IbZcopyPair, RemoteAccessErrorNamesTheCause) {
  auto src = randomBytes(1 << 20, 9);
  std::vector<uint8_t> dst(src.size());
  fabric.shiftNextWrite(int64_t(1) << 30);  // a region address that is not the receiver's
  void *s = nullptr, *r = nullptr;
  ASSERT_EQ(b->p->irecv(pr.recv, dst.data(), dst.size(), &r), 0) << b->error();
  ASSERT_EQ(b->p->isend(pr.send, src.data(), src.size(), 1, &s), 0) << b->error();
  EXPECT_NE(waitRequest(*b, s, nullptr, nullptr, 5), 0);
  EXPECT_TRUE(contains(b->error(), "InfiniBand mlx5_0:1 (peer mlx5_1:1): an RDMA write failed: remote access error"))
      << b->error();
  EXPECT_TRUE(contains(b->error(), "the peer's memory region refused the RDMA write")) << b->error();
  EXPECT_NE(waitRequest(*b, r, nullptr, nullptr, 5), 0);
  EXPECT_TRUE(contains(b->error(), "InfiniBand mlx5_1:1 (peer mlx5_0:1)")) << b->error();
  EXPECT_TRUE(contains(b->error(), "error state")) << b->error();
}

// A sender without zero-copy: its reply says so, and both sides stay eager.
TEST_F(IbZcopy, OneSideWithoutZeroCopyKeepsTheConnectionEager) {
  auto on = std::make_unique<Backend>(&fabric);
  auto off = std::make_unique<Backend>(&fabric, ConfigOverrides{{"COLL_IB_ZCOPY", "0"}});
  ASSERT_EQ(on->rc, 0) << on->error();
  ASSERT_EQ(off->rc, 0) << off->error();
  char handle[COLL_NET_HANDLE_BYTES], reply[COLL_NET_HANDLE_BYTES];
  void *listen = nullptr, *send = nullptr, *recv = nullptr;
  ASSERT_EQ(on->p->listen(on->ctx, 1, handle, &listen), 0) << on->error();
  ASSERT_EQ(off->p->connect(off->ctx, 0, handle, reply, &send), 0) << off->error();
  ASSERT_EQ(on->p->accept(listen, reply, &recv), 0) << on->error();
  Pair pr{send, recv};
  auto msgs = makeMsgs({1 << 20, 100, 300000}, {}, 12);
  Stats st;
  driveBoth(*on, pr, msgs, &st);
  checkMsgs(msgs);
  EXPECT_EQ(endpointCounts(recv).zcopyMsgs, 0u);
  EXPECT_EQ(fabric.traffic().writes, 0u);
  closePair(*on, pr);
  off.reset();
  on.reset();
}

// Closing a receiver whose region the sender is writing: nothing lands after close, and
// the sender fails instead of waiting.
TEST_F(IbZcopyPair, CloseRecvWithWritesInFlight) {
  auto src = randomBytes(1 << 20, 13);
  std::vector<uint8_t> dst(src.size(), 0xEE);
  void *s = nullptr, *r = nullptr;
  ASSERT_EQ(b->p->irecv(pr.recv, dst.data(), dst.size(), &r), 0) << b->error();
  ASSERT_EQ(b->p->isend(pr.send, src.data(), src.size(), 1, &s), 0) << b->error();
  ASSERT_EQ(b->p->closeRecv(pr.recv), 0) << b->error();
  pr.recv = nullptr;
  auto snapshot = dst;
  EXPECT_NE(waitRequest(*b, s, nullptr, nullptr, 5), 0);
  EXPECT_TRUE(contains(b->error(), "mlx5_0:1")) << b->error();
  EXPECT_EQ(dst, snapshot) << "written after closeRecv";
}

}  // namespace
}  // namespace coll::net::ib::test
