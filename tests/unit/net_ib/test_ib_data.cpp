// InfiniBand backend data path over the fake fabric: sizes around the header and slot
// boundaries, large messages, tags, order with more messages than requests, truncation,
// and two threads driving connections in opposite directions.
#include <thread>

#include "ib_drive.hpp"
#include "transport/net/ib/ib_wire.hpp"

namespace coll::net::ib::test {
namespace {

using fake::FakeFabric;

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
  const size_t h = kHeaderBytes, c = chunk;
  return {0, 1, h - 1, h, h + 1, c - h - 1, c - h, c - h + 1, c - 1, c, c + 1,
          2 * c - h, 2 * c - h + 1, 3 * c + 5, 7 * c, 0, 1, 12345};
}

TEST_F(IbData, SizesAroundBoundaries) {
  Backend b(&fabric, {{"COLL_IB_CHUNK", "4K"}, {"COLL_IB_SLOTS", "4"}});
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
  Backend b(&fabric, {{"COLL_IB_CHUNK", "64"}, {"COLL_IB_SLOTS", "1"}});
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 1);
  auto msgs = makeMsgs(boundarySizes(64), {}, 2);
  Stats st;
  driveBoth(b, pr, msgs, &st);
  checkMsgs(msgs);
  closePair(b, pr);
}

TEST_F(IbData, LargeMessagesThroughTheSlots) {
  Backend b(&fabric, {{"COLL_IB_ZCOPY", "0"}});  // default slots; zero-copy ones: test_ib_zcopy.cpp
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 1, 0);
  auto msgs = makeMsgs({(8u << 20) + 3, 64u << 20, 5}, {}, 3);
  Stats st;
  driveBoth(b, pr, msgs, &st);
  checkMsgs(msgs);
  closePair(b, pr);
}

TEST_F(IbData, OrderAndTagsWithMoreMessagesThanRequests) {
  Backend b(&fabric, {{"COLL_IB_CHUNK", "256"}, {"COLL_IB_SLOTS", "4"}});
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
  Backend b(&fabric, {{"COLL_IB_SLOTS", "4"}});
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
  Backend b(&fabric, {{"COLL_IB_CHUNK", "4K"}, {"COLL_IB_SLOTS", "2"}});
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
  Backend b(&fabric, {{"COLL_IB_CHUNK", "1K"}, {"COLL_IB_SLOTS", "8"}});
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
  {
    Backend b(&roce, {{"COLL_IB_CHUNK", "1K"}});
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
