// The UCX plugin's error paths in one process: NULL and out-of-range arguments, garbage
// handles and replies, endpoints of the wrong kind, and closing endpoints whose requests
// are still in flight (bounded in time, and no write to user memory afterwards).
#include <algorithm>

#include "net_ucx_fixture.hpp"

namespace net_ucx_test {
namespace {

// Expects a call to fail with a text that contains `want`.
#define EXPECT_FAILS_WITH(call, want)                                               \
  do {                                                                              \
    EXPECT_NE((call), 0) << #call " succeeded";                                     \
    EXPECT_NE(std::string(api_->lastError(a_)).find(want), std::string::npos)       \
        << #call ": lastError is \"" << api_->lastError(a_) << "\", wanted " want; \
  } while (0)

TEST_F(NetUcx, InvalidArguments) {
  char handle[COLL_NET_HANDLE_BYTES] = {}, reply[COLL_NET_HANDLE_BYTES] = {};
  void* comm = nullptr;
  void* req = nullptr;
  int ndev = 0, done = 0;
  collNetProperties_t props;
  char buf[16];
  EXPECT_FAILS_WITH(api_->init(nullptr, nullptr), "context is NULL");
  EXPECT_FAILS_WITH(api_->devices(nullptr, &ndev), "context is NULL");
  EXPECT_FAILS_WITH(api_->devices(a_, nullptr), "ndev is NULL");
  EXPECT_FAILS_WITH(api_->getProperties(a_, 1, &props), "device 1 out of range");
  EXPECT_FAILS_WITH(api_->getProperties(a_, -1, &props), "device -1 out of range");
  EXPECT_FAILS_WITH(api_->getProperties(a_, 0, nullptr), "props is NULL");
  EXPECT_FAILS_WITH(api_->listen(a_, 1, handle, &comm), "device 1 out of range");
  EXPECT_FAILS_WITH(api_->listen(a_, 0, nullptr, &comm), "handle is NULL");
  EXPECT_FAILS_WITH(api_->listen(nullptr, 0, handle, &comm), "context is NULL");
  EXPECT_FAILS_WITH(api_->connect(a_, 7, handle, reply, &comm), "device 7 out of range");
  EXPECT_FAILS_WITH(api_->connect(a_, 0, handle, nullptr, &comm), "reply is NULL");
  EXPECT_FAILS_WITH(api_->accept(nullptr, reply, &comm), "listen endpoint is NULL");
  EXPECT_FAILS_WITH(api_->isend(nullptr, buf, 1, 0, &req), "send endpoint is NULL");
  EXPECT_FAILS_WITH(api_->irecv(nullptr, buf, 1, &req), "receive endpoint is NULL");
  EXPECT_FAILS_WITH(api_->test(nullptr, &done, nullptr, nullptr), "request is NULL");
  EXPECT_FAILS_WITH(api_->closeSend(nullptr), "send endpoint is NULL");
  EXPECT_FAILS_WITH(api_->closeRecv(nullptr), "receive endpoint is NULL");
  EXPECT_FAILS_WITH(api_->closeListen(nullptr), "listen endpoint is NULL");

  Pair p;
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &p));
  EXPECT_FAILS_WITH(api_->isend(p.send, nullptr, 10, 0, &req), "data is NULL");
  EXPECT_FAILS_WITH(api_->isend(p.send, buf, 1, 0, nullptr), "request is NULL");
  EXPECT_FAILS_WITH(api_->irecv(p.recv, nullptr, 10, &req), "data is NULL");
  // Endpoints of the wrong kind.
  EXPECT_FAILS_WITH(api_->isend(p.recv, buf, 1, 0, &req), "not a send endpoint");
  EXPECT_FAILS_WITH(api_->irecv(p.send, buf, 1, &req), "not a receive endpoint");
  EXPECT_FAILS_WITH(api_->closeRecv(p.send), "not a receive endpoint");
  EXPECT_FAILS_WITH(api_->closeListen(p.recv), "not a listen endpoint");
  // A request tested again after it reported done.
  Op s, r;
  ASSERT_EQ(api_->irecv(p.recv, buf, sizeof buf, &r.req), 0) << err();
  ASSERT_EQ(api_->isend(p.send, buf, 0, 5, &s.req), 0) << err();
  driveAll({&s, &r});
  EXPECT_FAILS_WITH(api_->test(r.req, &done, nullptr, nullptr), "not in flight");
  // NULL size and tag are allowed.
  ASSERT_EQ(api_->irecv(p.recv, buf, sizeof buf, &r.req), 0) << err();
  ASSERT_EQ(api_->isend(p.send, buf, 3, 6, &s.req), 0) << err();
  for (double end = now() + 30; !(s.done && r.done) && now() < end;) {
    for (Op* op : {&s, &r}) {
      if (op->done) continue;
      ASSERT_EQ(api_->test(op->req, &done, nullptr, nullptr), 0) << err();
      op->done = done;
    }
  }
  EXPECT_TRUE(s.done && r.done);
  // An empty message may come from and go to NULL.
  Op s0, r0;
  ASSERT_EQ(api_->irecv(p.recv, nullptr, 0, &r0.req), 0) << err();
  ASSERT_EQ(api_->isend(p.send, nullptr, 0, 7, &s0.req), 0) << err();
  driveAll({&s0, &r0});
  EXPECT_EQ(r0.size, 0u);
  EXPECT_EQ(r0.tag, 7u);
  closePair(&p);
}

TEST_F(NetUcx, GarbageHandlesAndReplies) {
  unsigned char handle[COLL_NET_HANDLE_BYTES], reply[COLL_NET_HANDLE_BYTES], bad[COLL_NET_HANDLE_BYTES];
  void* listen = nullptr;
  void* comm = nullptr;
  ASSERT_EQ(api_->listen(b_, 0, handle, &listen), 0) << err();
  fillPattern(bad, sizeof bad, 5);
  EXPECT_FAILS_WITH(api_->connect(a_, 0, bad, reply, &comm), "handle is not from the UCX plugin");
  // The right header with one byte of the address changed.
  memcpy(bad, handle, sizeof bad);
  bad[40] ^= 0x10;
  EXPECT_FAILS_WITH(api_->connect(a_, 0, bad, reply, &comm), "handle is corrupt");
  memcpy(bad, handle, sizeof bad);
  bad[4] = 9;  // version
  EXPECT_FAILS_WITH(api_->connect(a_, 0, bad, reply, &comm), "protocol version 9");
  memcpy(bad, handle, sizeof bad);
  bad[6] = bad[7] = 0xFF;  // address length
  EXPECT_FAILS_WITH(api_->connect(a_, 0, bad, reply, &comm), "worker address of 65535 bytes");

  // Replies: garbage, and a true reply to another listen endpoint.
  fillPattern(bad, sizeof bad, 6);
  EXPECT_FAILS_WITH(api_->accept(listen, bad, &comm), "reply is not from the UCX plugin");
  unsigned char otherHandle[COLL_NET_HANDLE_BYTES], otherReply[COLL_NET_HANDLE_BYTES];
  void* otherListen = nullptr;
  void* otherSend = nullptr;
  ASSERT_EQ(api_->listen(b_, 0, otherHandle, &otherListen), 0) << err();
  ASSERT_EQ(api_->connect(a_, 0, otherHandle, otherReply, &otherSend), 0) << err();
  EXPECT_FAILS_WITH(api_->accept(listen, otherReply, &comm), "token mismatch");
  EXPECT_FAILS_WITH(api_->accept(listen, handle, &comm), "reply is not from the UCX plugin");  // a handle
  EXPECT_EQ(api_->closeListen(otherListen), 0) << err();
  EXPECT_EQ(api_->closeSend(otherSend), 0) << err();

  // After the failures the listen endpoint still connects.
  Pair p;
  ASSERT_EQ(api_->connect(a_, 0, handle, reply, &p.send), 0) << err();
  ASSERT_EQ(api_->accept(listen, reply, &p.recv), 0) << err();
  char out[5] = "ping", in[5] = {};
  Op s, r;
  ASSERT_EQ(api_->irecv(p.recv, in, sizeof in, &r.req), 0) << err();
  ASSERT_EQ(api_->isend(p.send, out, sizeof out, 1, &s.req), 0) << err();
  driveAll({&s, &r});
  EXPECT_STREQ(in, "ping");
  closePair(&p);
  // An unaccepted listen endpoint closes cleanly.
  ASSERT_EQ(api_->listen(b_, 0, handle, &listen), 0) << err();
  EXPECT_EQ(api_->closeListen(listen), 0) << err();
}

TEST_F(NetUcx, CloseWithRequestsInFlight) {
  constexpr size_t kBig = 8 << 20;
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &p));
  // Receives that never get a message: close drops them, and later sends on the same
  // connection must not write into their (still allocated) buffers.
  std::vector<unsigned char> small(100, 0x11), big(kBig, 0x22);
  Op r1, r2;
  ASSERT_EQ(api_->irecv(p.recv, small.data(), small.size(), &r1.req), 0) << err();
  ASSERT_EQ(api_->irecv(p.recv, big.data(), big.size(), &r2.req), 0) << err();
  double t0 = now();
  EXPECT_EQ(api_->closeRecv(p.recv), 0) << err();
  EXPECT_LT(now() - t0, 6.0);
  p.recv = nullptr;
  std::vector<unsigned char> out(kBig, 0x77);
  Op s1, s2;
  ASSERT_EQ(api_->isend(p.send, out.data(), 100, 1, &s1.req), 0) << err();
  ASSERT_EQ(api_->isend(p.send, out.data(), kBig, 2, &s2.req), 0) << err();
  for (double end = now() + 0.5; now() < end;) {
    ASSERT_NO_FATAL_FAILURE(step(&s1));
    ASSERT_NO_FATAL_FAILURE(step(&s2));
  }
  EXPECT_FALSE(s2.done) << "a rendezvous send completed without a receiver";
  // The large send waits for a receiver that is gone: close drops it within bounds.
  t0 = now();
  EXPECT_EQ(api_->closeSend(p.send), 0) << err();
  EXPECT_LT(now() - t0, 6.0);
  p.send = nullptr;
  EXPECT_TRUE(std::all_of(small.begin(), small.end(), [](unsigned char c) { return c == 0x11; }));
  EXPECT_TRUE(std::all_of(big.begin(), big.end(), [](unsigned char c) { return c == 0x22; }));

  // A fresh connection between the same contexts still works.
  Pair q;
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &q));
  std::vector<unsigned char> in(kBig);
  fillPattern(out.data(), kBig, 3);
  Op s, r;
  ASSERT_EQ(api_->irecv(q.recv, in.data(), kBig, &r.req), 0) << err();
  ASSERT_EQ(api_->isend(q.send, out.data(), kBig, 3, &s.req), 0) << err();
  driveAll({&s, &r});
  EXPECT_EQ(in, out);
  closePair(&q);
}

// UCX may pair endpoints that two workers create towards each other into one
// connection; dropping one connection with sends in flight must not break the others,
// whatever order they were made in.
TEST_F(NetUcx, AbortedConnectionLeavesOthersWorking) {
  char hx[COLL_NET_HANDLE_BYTES], hy[COLL_NET_HANDLE_BYTES], rx[COLL_NET_HANDLE_BYTES], ry[COLL_NET_HANDLE_BYTES];
  void *lx = nullptr, *ly = nullptr;
  Pair x, y;  // x: A -> B, y: B -> A, set up interleaved
  ASSERT_EQ(api_->listen(b_, 0, hx, &lx), 0) << err();
  ASSERT_EQ(api_->listen(a_, 0, hy, &ly), 0) << err();
  ASSERT_EQ(api_->connect(a_, 0, hx, rx, &x.send), 0) << err();
  ASSERT_EQ(api_->connect(b_, 0, hy, ry, &y.send), 0) << err();
  ASSERT_EQ(api_->accept(lx, rx, &x.recv), 0) << err();
  ASSERT_EQ(api_->accept(ly, ry, &y.recv), 0) << err();
  Pair z;  // another A -> B
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &z));
  char in[8], out[8] = "warm";
  for (Pair* p : {&x, &y, &z}) {
    Op s, r;
    ASSERT_EQ(api_->irecv(p->recv, in, sizeof in, &r.req), 0) << err();
    ASSERT_EQ(api_->isend(p->send, out, sizeof out, 0, &s.req), 0) << err();
    driveAll({&s, &r});
  }
  // x is aborted on both sides with a rendezvous send and a receive in flight.
  std::vector<unsigned char> big(4 << 20, 3);
  Op stuck, waiting;
  ASSERT_EQ(api_->isend(x.send, big.data(), big.size(), 1, &stuck.req), 0) << err();
  ASSERT_EQ(api_->irecv(y.recv, in, sizeof in, &waiting.req), 0) << err();
  ASSERT_NO_FATAL_FAILURE(step(&stuck));
  EXPECT_EQ(api_->closeSend(x.send), 0) << err();
  EXPECT_EQ(api_->closeRecv(x.recv), 0) << err();
  for (double end = now() + 0.5; now() < end;) ASSERT_NO_FATAL_FAILURE(step(&waiting));
  // y and z still carry messages, including the receive that waited through the abort.
  std::vector<unsigned char> msg(100000), got(100000);
  fillPattern(msg.data(), msg.size(), 11);
  Op sy, sz, rz;
  ASSERT_EQ(api_->isend(y.send, out, sizeof out, 5, &sy.req), 0) << err();
  ASSERT_EQ(api_->irecv(z.recv, got.data(), got.size(), &rz.req), 0) << err();
  ASSERT_EQ(api_->isend(z.send, msg.data(), msg.size(), 6, &sz.req), 0) << err();
  driveAll({&sy, &waiting, &sz, &rz}, 30);
  EXPECT_EQ(waiting.tag, 5u);
  EXPECT_EQ(got, msg);
  closePair(&y);
  closePair(&z);
}

// finalize closes what the library left open.
TEST_F(NetUcx, FinalizeWithOpenEndpoints) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(connectPair(a_, b_, &p));
  char handle[COLL_NET_HANDLE_BYTES];
  void* listen = nullptr;
  ASSERT_EQ(api_->listen(a_, 0, handle, &listen), 0) << err();
  std::vector<unsigned char> buf(1 << 20);
  Op r;
  ASSERT_EQ(api_->irecv(p.recv, buf.data(), buf.size(), &r.req), 0) << err();
  double t0 = now();
  api_->finalize(b_);
  api_->finalize(a_);
  a_ = b_ = nullptr;
  EXPECT_LT(now() - t0, 12.0);
}

}  // namespace
}  // namespace net_ucx_test
