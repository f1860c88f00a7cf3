// InfiniBand backend failures over the fake fabric: error completions and QPs in ERROR
// fail requests with a message naming the device; closing with requests in flight is
// safe and frees everything.
#include "ib_harness.hpp"

namespace coll::net::ib::test {
namespace {

using fake::FakeFabric;

class IbFaults : public ::testing::Test {
 protected:
  IbFaults() : fabric({fake::ibDevice("mlx5_0"), fake::ibDevice("mlx5_1")}) {}
  void SetUp() override {
    b = std::make_unique<Backend>(&fabric, ConfigOverrides{{"COLL_IB_CHUNK", "1K"}, {"COLL_IB_SLOTS", "4"}});
    ASSERT_EQ(b->rc, 0) << b->error();
    pr = connectPair(*b, 0, 1);
    qpns = fabric.qpns();  // listen made the receiver's QP, connect the sender's
    ASSERT_EQ(qpns.size(), 2u);
  }
  void TearDown() override {
    closePair(*b, pr);
    b.reset();
    auto c = fabric.live();
    EXPECT_EQ(c.qps + c.mrs + c.cqs + c.pds + c.contexts, 0);
    EXPECT_TRUE(fabric.misuse().empty()) << fabric.misuse().front();
  }
  FakeFabric fabric;
  std::unique_ptr<Backend> b;
  Pair pr;
  std::vector<uint32_t> qpns;
  std::vector<uint8_t> src = randomBytes(10000, 1), dst = std::vector<uint8_t>(10000);
};

TEST_F(IbFaults, FailedSendCompletionFailsTheRequest) {
  fabric.failNextSend(IBV_WC_RETRY_EXC_ERR);
  void* req = nullptr;
  ASSERT_EQ(b->p->isend(pr.send, src.data(), src.size(), 1, &req), 0) << b->error();
  ASSERT_NE(req, nullptr);
  EXPECT_NE(waitRequest(*b, req), 0);
  EXPECT_TRUE(contains(b->error(), "InfiniBand mlx5_0:1 (peer mlx5_1:1): a send failed: transport retry counter exceeded"))
      << b->error();
  std::string first = b->error();
  // The endpoint stays failed, with its first error.
  void* more = nullptr;
  EXPECT_NE(b->p->isend(pr.send, src.data(), 10, 1, &more), 0);
  EXPECT_EQ(b->error(), first);
  EXPECT_NE(waitRequest(*b, req), 0);
}

TEST_F(IbFaults, ReceiverQpInErrorFailsItsReceive) {
  void* rreq = nullptr;
  ASSERT_EQ(b->p->irecv(pr.recv, dst.data(), dst.size(), &rreq), 0) << b->error();
  fabric.breakQp(qpns[0]);
  EXPECT_NE(waitRequest(*b, rreq), 0);
  EXPECT_TRUE(contains(b->error(), "InfiniBand mlx5_1:1 (peer mlx5_0:1): a receive failed: Work Request Flushed Error"))
      << b->error();
  // The sender finds out too: its SENDs reach a QP that no longer takes them.
  void* sreq = nullptr;
  ASSERT_EQ(b->p->isend(pr.send, src.data(), src.size(), 1, &sreq), 0) << b->error();
  EXPECT_NE(waitRequest(*b, sreq), 0);
  EXPECT_TRUE(contains(b->error(), "mlx5_0:1")) << b->error();
}

TEST_F(IbFaults, SenderQpInErrorFailsItsSends) {
  void* sreq = nullptr;
  ASSERT_EQ(b->p->isend(pr.send, src.data(), src.size(), 1, &sreq), 0) << b->error();
  fabric.breakQp(qpns[1]);
  EXPECT_NE(waitRequest(*b, sreq), 0);
  EXPECT_TRUE(contains(b->error(), "InfiniBand mlx5_0:1 (peer mlx5_1:1)")) << b->error();
  EXPECT_TRUE(contains(b->error(), "Work Request Flushed Error")) << b->error();
}

// The receiver goes away while the sender's pieces are on the wire: they fail (as a
// NIC's retries would run out) instead of hanging.
TEST_F(IbFaults, PeerGoneFailsOutstandingSends) {
  void* s = nullptr;
  ASSERT_EQ(b->p->isend(pr.send, src.data(), 5000, 1, &s), 0) << b->error();
  ASSERT_EQ(b->p->closeRecv(pr.recv), 0) << b->error();
  pr.recv = nullptr;
  EXPECT_NE(waitRequest(*b, s), 0);
  EXPECT_TRUE(contains(b->error(), "InfiniBand mlx5_0:1 (peer mlx5_1:1): a send failed: transport retry counter exceeded"))
      << b->error();
}

// Closing a receiver with receives posted and messages half arrived: nothing is written
// into the user's buffers afterwards, and the sender fails or waits but never crashes.
TEST_F(IbFaults, CloseRecvWithRequestsInFlight) {
  std::vector<void*> sreqs;
  std::vector<std::vector<uint8_t>> bufs(3, std::vector<uint8_t>(5000, 0xEE));
  for (auto& buf : bufs) {
    void* r = nullptr;
    ASSERT_EQ(b->p->irecv(pr.recv, buf.data(), buf.size(), &r), 0) << b->error();
  }
  for (int i = 0; i < 6; ++i) {
    void* s = nullptr;
    ASSERT_EQ(b->p->isend(pr.send, src.data(), 5000, uint64_t(i), &s), 0) << b->error();
    sreqs.push_back(s);
  }
  ASSERT_EQ(b->p->closeRecv(pr.recv), 0) << b->error();
  pr.recv = nullptr;
  auto snapshot = bufs;
  for (int round = 0; round < 1000; ++round)
    for (void* s : sreqs) {
      int done = 0;
      if (b->p->test(s, &done, nullptr, nullptr) != 0) {
        EXPECT_TRUE(contains(b->error(), "mlx5_0:1")) << b->error();
        round = 1000;
        break;
      }
      EXPECT_EQ(done, 0) << "a message completed whose receiver is gone";
    }
  EXPECT_EQ(bufs, snapshot) << "receive buffers written after closeRecv";
}

// The sender goes away: the receiver's credits find no one, and it fails with a message
// (or, had it nothing to return, would wait for the library's timeout).
TEST_F(IbFaults, CloseSendWithRequestsInFlight) {
  for (int i = 0; i < 8; ++i) {
    void* s = nullptr;
    ASSERT_EQ(b->p->isend(pr.send, src.data(), src.size(), uint64_t(i), &s), 0) << b->error();
  }
  void* r = nullptr;
  ASSERT_EQ(b->p->irecv(pr.recv, dst.data(), dst.size(), &r), 0) << b->error();
  ASSERT_EQ(b->p->closeSend(pr.send), 0) << b->error();
  pr.send = nullptr;
  EXPECT_NE(waitRequest(*b, r, nullptr, nullptr, 5), 0);
  EXPECT_TRUE(contains(b->error(), "InfiniBand mlx5_1:1 (peer mlx5_0:1): a credit send failed")) << b->error();
}

TEST_F(IbFaults, RemoteAccessErrorNamesTheStatus) {
  fabric.failNextSend(IBV_WC_REM_ACCESS_ERR);
  void* r = nullptr;
  ASSERT_EQ(b->p->irecv(pr.recv, dst.data(), 100, &r), 0) << b->error();
  void* s = nullptr;
  ASSERT_EQ(b->p->isend(pr.send, src.data(), 100, 1, &s), 0) << b->error();
  EXPECT_NE(waitRequest(*b, s), 0);
  EXPECT_TRUE(contains(b->error(), "remote access error")) << b->error();
}

}  // namespace
}  // namespace coll::net::ib::test
