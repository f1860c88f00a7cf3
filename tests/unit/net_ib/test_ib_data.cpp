// InfiniBand backend data path over the fake fabric: sizes around the header and slot
// boundaries, large messages, tags, order with more messages than requests, truncation,
// and two threads driving connections in opposite directions.
#include <thread>

#include "ib_harness.hpp"

namespace coll::net::ib::test {
namespace {

using fake::FakeFabric;

constexpr size_t kGuard = 32;
constexpr uint8_t kGuardByte = 0xA5;

struct Msg {
  std::vector<uint8_t> src;
  std::vector<uint8_t> dst;  // cap bytes, then kGuard guard bytes
  size_t cap = 0;
  uint64_t tag = 0;
  void* sreq = nullptr;
  void* rreq = nullptr;
  bool sdone = false, rdone = false;
  size_t sentSize = ~size_t(0), gotSize = ~size_t(0);
  uint64_t gotTag = 0;
};

std::vector<Msg> makeMsgs(const std::vector<size_t>& sizes, const std::vector<size_t>& caps, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<Msg> m(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    m[i].src = randomBytes(sizes[i], seed * 1000 + i);
    m[i].cap = caps.empty() ? sizes[i] : caps[i];
    m[i].dst.assign(m[i].cap + kGuard, kGuardByte);
    m[i].tag = g();
  }
  return m;
}

struct Stats {
  int nullSends = 0, nullRecvs = 0;
};

// One side of a connection: posts its messages (retrying when the backend hands out
// NULL) and tests those in flight. A side is driven from one thread at a time.
class Side {
 public:
  Side(const Backend& b, void* ep, std::vector<Msg>& msgs, bool send, int* nulls)
      : b_(b), ep_(ep), msgs_(msgs), send_(send), nulls_(nulls) {}
  bool finished() const { return failed_ || done_ == msgs_.size(); }
  void step() {
    while (!failed_ && next_ < msgs_.size()) {
      Msg& m = msgs_[next_];
      void** req = send_ ? &m.sreq : &m.rreq;
      int rc = send_ ? b_.p->isend(ep_, m.src.data(), m.src.size(), m.tag, req)
                     : b_.p->irecv(ep_, m.cap ? m.dst.data() : nullptr, m.cap, req);
      if (rc) return fail(send_ ? "isend" : "irecv");
      if (!*req) {
        (*nulls_)++;
        break;
      }
      next_++;
    }
    for (size_t i = done_; i < next_ && !failed_; ++i) {
      Msg& m = msgs_[i];
      bool& flag = send_ ? m.sdone : m.rdone;
      if (flag) continue;
      int d = 0;
      int rc = send_ ? b_.p->test(m.sreq, &d, &m.sentSize, nullptr) : b_.p->test(m.rreq, &d, &m.gotSize, &m.gotTag);
      if (rc) return fail("test");
      flag = d;
    }
    while (done_ < next_ && (send_ ? msgs_[done_].sdone : msgs_[done_].rdone)) done_++;
  }
  std::string where() const {
    return testing::PrintToString(done_) + " of " + testing::PrintToString(msgs_.size()) +
           (send_ ? " sends" : " receives") + " done";
  }

 private:
  void fail(const char* what) {
    ADD_FAILURE() << what << " failed: " << b_.error();
    failed_ = true;
  }
  const Backend& b_;
  void* ep_;
  std::vector<Msg>& msgs_;
  bool send_;
  int* nulls_;
  size_t next_ = 0, done_ = 0;
  bool failed_ = false;
};

void drive(std::vector<Side*> sides, double seconds = 60) {
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    bool all = true;
    for (Side* s : sides) {
      s->step();
      all = all && s->finished();
    }
    if (all) return;
    if (Clock::now() > end) {
      for (Side* s : sides) ADD_FAILURE() << "timed out: " << s->where();
      return;
    }
  }
}

// Both ends of one connection from one thread, as one rank's thread does.
void driveBoth(const Backend& b, Pair& pr, std::vector<Msg>& msgs, Stats* st) {
  Side s(b, pr.send, msgs, true, &st->nullSends), r(b, pr.recv, msgs, false, &st->nullRecvs);
  drive({&s, &r});
}

void checkMsgs(const std::vector<Msg>& msgs) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Msg& m = msgs[i];
    SCOPED_TRACE(testing::Message() << "message " << i << " of " << m.src.size() << " bytes into " << m.cap);
    EXPECT_EQ(m.sentSize, m.src.size());
    EXPECT_EQ(m.gotSize, m.src.size());
    EXPECT_EQ(m.gotTag, m.tag);
    size_t n = std::min(m.cap, m.src.size());
    if (n) {  // memcmp of no bytes may still not take a null pointer
      EXPECT_EQ(memcmp(m.dst.data(), m.src.data(), n), 0);
    }
    for (size_t k = n; k < m.dst.size(); ++k)
      if (m.dst[k] != kGuardByte) {
        ADD_FAILURE() << "byte " << k << " written past the message or the receive";
        break;
      }
  }
}

class IbData : public ::testing::Test {
 protected:
  IbData() : fabric({fake::ibDevice("mlx5_0"), fake::ibDevice("mlx5_1")}) {}
  void TearDown() override {
    auto c = fabric.live();
    EXPECT_EQ(c.qps, 0);
    EXPECT_EQ(c.mrs, 0);
    EXPECT_EQ(c.cqs, 0);
    EXPECT_TRUE(fabric.misuse().empty()) << fabric.misuse().front();
  }
  FakeFabric fabric;
};

std::vector<size_t> boundarySizes(size_t chunk) {
  const size_t h = 16, c = chunk;
  return {0, 1, h - 1, h, h + 1, c - h - 1, c - h, c - h + 1, c - 1, c, c + 1,
          2 * c - h, 2 * c - h + 1, 3 * c + 5, 7 * c, 0, 1, 12345};
}

TEST_F(IbData, SizesAroundBoundaries) {
  ScopedEnv env({{"COLL_IB_CHUNK", "4K"}, {"COLL_IB_SLOTS", "4"}});
  Backend b(&fabric);
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 1);
  auto msgs = makeMsgs(boundarySizes(4096), {}, 1);
  Stats st;
  driveBoth(b, pr, msgs, &st);
  checkMsgs(msgs);
  closePair(b, pr);
}

TEST_F(IbData, SizesWithImmediateDelivery) {
  fabric.setDeferred(false);
  ScopedEnv env({{"COLL_IB_CHUNK", "64"}, {"COLL_IB_SLOTS", "1"}});
  Backend b(&fabric);
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 1);
  auto msgs = makeMsgs(boundarySizes(64), {}, 2);
  Stats st;
  driveBoth(b, pr, msgs, &st);
  checkMsgs(msgs);
  closePair(b, pr);
}

TEST_F(IbData, LargeMessages) {
  Backend b(&fabric);  // default slots
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 1, 0);
  auto msgs = makeMsgs({(8u << 20) + 3, 64u << 20, 5}, {}, 3);
  Stats st;
  driveBoth(b, pr, msgs, &st);
  checkMsgs(msgs);
  closePair(b, pr);
}

TEST_F(IbData, OrderAndTagsWithMoreMessagesThanRequests) {
  ScopedEnv env({{"COLL_IB_CHUNK", "256"}, {"COLL_IB_SLOTS", "4"}});
  Backend b(&fabric);
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 1);
  std::vector<size_t> sizes;
  for (int i = 0; i < 400; ++i) sizes.push_back(size_t(i * 37 % 700));
  auto msgs = makeMsgs(sizes, {}, 4);
  Stats st;
  driveBoth(b, pr, msgs, &st);
  checkMsgs(msgs);
  EXPECT_GT(st.nullSends + st.nullRecvs, 0) << "never more than maxRequests in flight";
  closePair(b, pr);
}

TEST_F(IbData, RequestsBeyondMaxAreNull) {
  ScopedEnv env({{"COLL_IB_SLOTS", "4"}});
  Backend b(&fabric);
  ASSERT_EQ(b.rc, 0) << b.error();
  collNetProperties_t props;
  ASSERT_EQ(b.p->getProperties(b.ctx, 0, &props), 0);
  Pair pr = connectPair(b, 0, 1);
  auto msgs = makeMsgs(std::vector<size_t>(size_t(props.maxRequests) + 1, 10), {}, 5);
  for (int i = 0; i < props.maxRequests; ++i) {
    ASSERT_EQ(b.p->isend(pr.send, msgs[i].src.data(), 10, 7, &msgs[i].sreq), 0) << b.error();
    ASSERT_NE(msgs[i].sreq, nullptr) << i;
  }
  void* extra = &extra;
  EXPECT_EQ(b.p->isend(pr.send, msgs.back().src.data(), 10, 7, &extra), 0) << b.error();
  EXPECT_EQ(extra, nullptr);
  closePair(b, pr);  // with every send in flight
}

TEST_F(IbData, TruncationKeepsTrueSizeAndStream) {
  ScopedEnv env({{"COLL_IB_CHUNK", "4K"}, {"COLL_IB_SLOTS", "2"}});
  Backend b(&fabric);
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 1);
  auto msgs = makeMsgs({100, 3 * 4096 + 7, 50, 20000, 1, 4096}, {40, 4096 + 3, 50, 0, 0, 5000}, 6);
  Stats st;
  driveBoth(b, pr, msgs, &st);
  checkMsgs(msgs);  // true sizes, caps honoured, guards intact
  closePair(b, pr);
}

// Rank 0 sends on A and receives on B, rank 1 the reverse, each in its own thread.
TEST_F(IbData, OppositeDirectionsFromTwoThreads) {
  ScopedEnv env({{"COLL_IB_CHUNK", "1K"}, {"COLL_IB_SLOTS", "8"}});
  Backend b(&fabric);
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair a = connectPair(b, 0, 1);
  Pair c = connectPair(b, 1, 0);
  std::vector<size_t> sizes;
  for (int i = 0; i < 300; ++i) sizes.push_back(size_t(i * 131 % 5000));
  auto ma = makeMsgs(sizes, {}, 7), mc = makeMsgs(sizes, {}, 8);
  Stats s0, s1;
  // Each thread owns one send and one receive endpoint.
  std::thread r0([&] {
    Side sa(b, a.send, ma, true, &s0.nullSends), rc(b, c.recv, mc, false, &s0.nullRecvs);
    drive({&sa, &rc});
  });
  std::thread r1([&] {
    Side sc(b, c.send, mc, true, &s1.nullSends), ra(b, a.recv, ma, false, &s1.nullRecvs);
    drive({&sc, &ra});
  });
  r0.join();
  r1.join();
  checkMsgs(ma);
  checkMsgs(mc);
  closePair(b, a);
  closePair(b, c);
}

TEST(IbDataRoce, Pair) {
  FakeFabric roce({fake::roceDevice("rocep1s0", {fake::linkLocalGid(1), fake::ipv4Gid(10, 0, 0, 1)}),
                   fake::roceDevice("rocep2s0", {fake::linkLocalGid(2), fake::ipv4Gid(10, 0, 0, 2)})});
  ScopedEnv env({{"COLL_IB_CHUNK", "1K"}});
  {
    Backend b(&roce);
    ASSERT_EQ(b.rc, 0) << b.error();
    Pair pr = connectPair(b, 0, 1);
    auto msgs = makeMsgs({0, 1, 3000, 100000}, {}, 9);
    Stats st;
    driveBoth(b, pr, msgs, &st);
    checkMsgs(msgs);
    closePair(b, pr);
  }
  EXPECT_TRUE(roce.misuse().empty());
  EXPECT_EQ(roce.live().contexts, 0);
}

}  // namespace
}  // namespace coll::net::ib::test
