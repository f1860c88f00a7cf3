// InfiniBand backend connection setup over the fake fabric: handle and reply validation,
// wrong objects, mismatched link layers, and that closing frees every verbs object.
#include <cstring>

#include "ib_harness.hpp"
#include "transport/net/ib/ib_wire.hpp"

namespace coll::net::ib::test {
namespace {

using fake::FakeFabric;

class IbConnect : public ::testing::Test {
 protected:
  IbConnect() : fabric({fake::ibDevice("mlx5_0"), fake::ibDevice("mlx5_1")}), b(&fabric) {}
  void SetUp() override { ASSERT_EQ(b.rc, 0) << b.error(); }
  void TearDown() override {
    EXPECT_EQ(fabric.live().qps, 0);
    EXPECT_EQ(fabric.live().mrs, 0);
    EXPECT_TRUE(fabric.misuse().empty()) << fabric.misuse().front();
  }
  FakeFabric fabric;
  Backend b;
};

TEST_F(IbConnect, GarbageHandleIsRefused) {
  auto junk = randomBytes(COLL_NET_HANDLE_BYTES, 11);
  char reply[COLL_NET_HANDLE_BYTES];
  void* send = &send;
  EXPECT_NE(b.p->connect(b.ctx, 0, junk.data(), reply, &send), 0);
  EXPECT_TRUE(contains(b.error(), "InfiniBand connect on mlx5_0:1: not an InfiniBand connection handle"))
      << b.error();
  EXPECT_NE(b.p->connect(b.ctx, 0, nullptr, reply, &send), 0);
  EXPECT_TRUE(contains(b.error(), "is NULL")) << b.error();
}

TEST_F(IbConnect, HandleFieldsAreChecked) {
  char handle[COLL_NET_HANDLE_BYTES], reply[COLL_NET_HANDLE_BYTES];
  void* listen = nullptr;
  ASSERT_EQ(b.p->listen(b.ctx, 1, handle, &listen), 0) << b.error();
  struct Case {
    void (*edit)(ConnInfo*);
    const char* message;
  };
  const Case cases[] = {
      {[](ConnInfo* c) { c->version = 9; }, "protocol version 9; this build speaks 2"},
      {[](ConnInfo* c) { c->bytes = 12; }, "laid out in 12 bytes"},
      {[](ConnInfo* c) { c->kind = kConnReply; }, "expected a connection handle"},
      {[](ConnInfo* c) { c->qpn[0] = 0; }, "invalid QP number"},
      {[](ConnInfo* c) { c->nqps = 17; }, "names 17 queue pairs"},
      {[](ConnInfo* c) { c->mtu = 9; }, "invalid MTU code 9"},
      {[](ConnInfo* c) { c->linkLayer = 7; }, "unknown link layer 7"},
      {[](ConnInfo* c) { c->chunk = 3; }, "invalid buffer shape"},
      {[](ConnInfo* c) { c->slots = 0; }, "invalid buffer shape"},
      {[](ConnInfo* c) { c->chunk = kMaxChunk, c->slots = 64; }, "over 1 GiB"},
  };
  for (const Case& k : cases) {
    char bad[COLL_NET_HANDLE_BYTES];
    memcpy(bad, handle, sizeof(bad));
    k.edit(reinterpret_cast<ConnInfo*>(bad));
    void* send = nullptr;
    EXPECT_NE(b.p->connect(b.ctx, 0, bad, reply, &send), 0) << k.message;
    EXPECT_TRUE(contains(b.error(), k.message)) << b.error();
  }
  // The untouched handle still connects.
  void* send = nullptr;
  ASSERT_EQ(b.p->connect(b.ctx, 0, handle, reply, &send), 0) << b.error();
  // A garbage reply fails accept; the listen endpoint is then closed by its owner.
  auto junk = randomBytes(COLL_NET_HANDLE_BYTES, 12);
  void* recv = nullptr;
  EXPECT_NE(b.p->accept(listen, junk.data(), &recv), 0);
  EXPECT_TRUE(contains(b.error(), "InfiniBand accept on mlx5_1:1: not an InfiniBand connection reply"))
      << b.error();
  EXPECT_NE(b.p->accept(listen, handle, &recv), 0);
  EXPECT_TRUE(contains(b.error(), "expected a connection reply")) << b.error();
  EXPECT_EQ(b.p->closeListen(listen), 0) << b.error();
  EXPECT_EQ(b.p->closeSend(send), 0) << b.error();
}

TEST_F(IbConnect, ReplyMustAnswerThisHandle) {
  char h1[COLL_NET_HANDLE_BYTES], h2[COLL_NET_HANDLE_BYTES], r1[COLL_NET_HANDLE_BYTES],
      r2[COLL_NET_HANDLE_BYTES];
  void *l1 = nullptr, *l2 = nullptr, *s1 = nullptr, *s2 = nullptr, *rv = nullptr;
  ASSERT_EQ(b.p->listen(b.ctx, 1, h1, &l1), 0) << b.error();
  ASSERT_EQ(b.p->listen(b.ctx, 1, h2, &l2), 0) << b.error();
  ASSERT_EQ(b.p->connect(b.ctx, 0, h1, r1, &s1), 0) << b.error();
  ASSERT_EQ(b.p->connect(b.ctx, 0, h2, r2, &s2), 0) << b.error();
  EXPECT_NE(b.p->accept(l1, r2, &rv), 0);
  EXPECT_TRUE(contains(b.error(), "does not answer this endpoint's handle (token mismatch)")) << b.error();
  ASSERT_EQ(b.p->accept(l1, r1, &rv), 0) << b.error();
  EXPECT_NE(rv, nullptr);
  // l2 was never accepted: closeListen drops it.
  EXPECT_EQ(b.p->closeListen(l2), 0);
  EXPECT_EQ(b.p->closeSend(s1), 0);
  EXPECT_EQ(b.p->closeSend(s2), 0);
  EXPECT_EQ(b.p->closeRecv(rv), 0);
}

TEST_F(IbConnect, WrongObjectsAreRefused) {
  Pair pr = connectPair(b, 0, 1);
  void* req = nullptr;
  char buf[8] = {};
  EXPECT_NE(b.p->irecv(pr.send, buf, 8, &req), 0);
  EXPECT_TRUE(contains(b.error(), "receive endpoint is not one")) << b.error();
  EXPECT_NE(b.p->isend(pr.recv, buf, 8, 0, &req), 0);
  EXPECT_NE(b.p->closeRecv(pr.send), 0);
  EXPECT_NE(b.p->isend(pr.send, nullptr, 8, 0, &req), 0);
  EXPECT_TRUE(contains(b.error(), "data is NULL for 8 bytes")) << b.error();
  int done = 0;
  EXPECT_NE(b.p->test(pr.send, &done, nullptr, nullptr), 0);
  EXPECT_NE(b.p->test(nullptr, &done, nullptr, nullptr), 0);
  EXPECT_NE(b.p->isend(pr.send, buf, 8, 0, nullptr), 0);
  EXPECT_NE(b.p->listen(b.ctx, 5, buf, &req), 0);
  EXPECT_TRUE(contains(b.error(), "device 5 does not exist")) << b.error();
  // A zero-byte message may come from NULL.
  ASSERT_EQ(b.p->isend(pr.send, nullptr, 0, 42, &req), 0) << b.error();
  void* rreq = nullptr;
  ASSERT_EQ(b.p->irecv(pr.recv, nullptr, 0, &rreq), 0) << b.error();
  size_t size = 99;
  uint64_t tag = 0;
  EXPECT_EQ(waitRequest(b, rreq, &size, &tag), 0) << b.error();
  EXPECT_EQ(size, 0u);
  EXPECT_EQ(tag, 42u);
  EXPECT_EQ(waitRequest(b, req), 0) << b.error();
  closePair(b, pr);
}

TEST(IbConnectMixed, InfiniBandCannotReachRoce) {
  FakeFabric f({fake::ibDevice("mlx5_0"), fake::roceDevice("rocep1s0", {fake::ipv4Gid(10, 0, 0, 1)})});
  Backend b(&f);
  ASSERT_EQ(b.rc, 0) << b.error();
  char handle[COLL_NET_HANDLE_BYTES], reply[COLL_NET_HANDLE_BYTES];
  void *listen = nullptr, *send = nullptr;
  ASSERT_EQ(b.p->listen(b.ctx, 1, handle, &listen), 0) << b.error();
  EXPECT_NE(b.p->connect(b.ctx, 0, handle, reply, &send), 0);
  EXPECT_EQ(b.error(), "InfiniBand mlx5_0:1 (InfiniBand) cannot reach rocep1s0:1 (Ethernet)");
  EXPECT_EQ(b.p->closeListen(listen), 0);
  EXPECT_EQ(f.live().qps, 0);
  EXPECT_EQ(f.live().mrs, 0);
}

// The stripes of a zero-copy message: they tile [0, len) in QP order, start on page
// boundaries, and short messages leave the last QPs an empty stripe.
TEST(IbWire, StripesTileTheMessage) {
  for (size_t len : {size_t(0), size_t(1), size_t(4096), size_t(4097), size_t(3 * 4096 + 17), size_t(1) << 20,
                     (size_t(1) << 20) + 5})
    for (uint32_t n : {1u, 2u, 3u, 4u, 16u}) {
      size_t next = 0;
      for (uint32_t q = 0; q < n; ++q) {
        size_t lo = 0, hi = 0;
        stripeOf(len, q, n, &lo, &hi);
        EXPECT_EQ(lo, next) << len << " bytes, stripe " << q << " of " << n;
        EXPECT_LE(lo, hi);
        if (lo < len) {
          EXPECT_EQ(lo % 4096, 0u);
        }
        next = hi;
      }
      EXPECT_EQ(next, len) << len << " bytes over " << n;
    }
  size_t lo = 0, hi = 0;
  stripeOf(4097, 2, 4, &lo, &hi);
  EXPECT_EQ(lo, hi) << "a page and a byte over four QPs: the third and fourth write nothing";
}

// Endpoints may outlive finalize(): they keep their device open until closed.
TEST(IbConnectLifetime, EndpointsOutliveFinalize) {
  FakeFabric f({fake::ibDevice("mlx5_0")});
  Pair pr;
  const collNetPlugin_v1_t* p = ibBackend();
  {
    Backend b(&f);
    ASSERT_EQ(b.rc, 0) << b.error();
    pr = connectPair(b, 0, 0);  // loopback through one port
  }
  EXPECT_EQ(f.live().contexts, 1);
  std::vector<uint8_t> src = randomBytes(1000, 3), dst(1000);
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(p->isend(pr.send, src.data(), src.size(), 5, &sreq), 0);
  ASSERT_EQ(p->irecv(pr.recv, dst.data(), dst.size(), &rreq), 0);
  int sd = 0, rd = 0;
  for (int i = 0; i < 1000 && !(sd && rd); ++i) {
    if (!sd) {
      ASSERT_EQ(p->test(sreq, &sd, nullptr, nullptr), 0) << p->lastError(nullptr);
    }
    if (!rd) {
      ASSERT_EQ(p->test(rreq, &rd, nullptr, nullptr), 0) << p->lastError(nullptr);
    }
  }
  ASSERT_TRUE(sd && rd);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(p->closeSend(pr.send), 0);
  EXPECT_EQ(p->closeRecv(pr.recv), 0);
  EXPECT_EQ(f.live().contexts, 0);
  EXPECT_EQ(f.live().pds, 0);
  EXPECT_TRUE(f.misuse().empty()) << f.misuse().front();
}

}  // namespace
}  // namespace coll::net::ib::test
