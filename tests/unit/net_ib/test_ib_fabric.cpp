// The fake fabric's RDMA writes and memory, driven by raw verbs on connected queue
// pairs (the backend's QpSet makes them): a write inside a region lands, one outside it
// or without the rights is a remote access error that breaks both QPs, a write with
// immediate takes a receive, pinned registrations go stale when their pages are
// replaced while on-demand ones follow, and shuffled delivery keeps each QP's order but
// not the order across QPs.
#include <arpa/inet.h>

#include <cstring>

#include "ib_harness.hpp"
#include "transport/net/ib/ib_qp.hpp"

namespace coll::net::ib::test {
namespace {

using fake::FakeFabric;

struct Link {
  Link(FakeFabric& f, uint32_t nqps, bool remoteWrite) : ports(discoverPorts(*f.ops(), {})) {
    QpShape shape;
    shape.nqps = nqps;
    shape.chunk = 4096;
    shape.slots = 1;
    shape.send0 = shape.sendN = 64;
    shape.recv0 = shape.recvN = 64;
    shape.remoteWrite = remoteWrite;
    Tunables tun;
    a = std::make_unique<QpSet>(std::vector<Port>{ports[0]}, tun, shape);
    b = std::make_unique<QpSet>(std::vector<Port>{ports[1]}, tun, shape);
    ConnInfo ia, ib;
    ConnPorts xa, xb;
    a->describe(&ia, &xa, kConnHandle);
    b->describe(&ib, &xb, kConnReply);
    PeerPorts one;
    one.ports[0].lid = ib.lid;
    one.ports[0].mtu = ib.mtu;
    one.ports[0].linkLayer = ib.linkLayer;
    a->connectTo(ib, one);
    one.ports[0].lid = ia.lid;
    b->connectTo(ia, one);
  }
  ibv_mr* reg(int side, void* p, size_t n, int access) {
    return ops().reg_mr(ports[size_t(side)].dev->pd, p, n, access);
  }
  const VerbsOps& ops() const { return a->ops(); }
  void write(uint32_t q, ibv_mr* src, uint64_t raddr, uint32_t rkey, size_t n, bool imm, uint32_t immValue = 0) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(src->addr), uint32_t(n), src->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 77;
    wr.sg_list = n ? &sge : nullptr;
    wr.num_sge = n ? 1 : 0;
    wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.imm_data = htonl(immValue);
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ops().post_send(a->qp(q), &wr, &bad), 0);
  }
  void recv0(uint32_t q, uint64_t id) {
    ibv_recv_wr wr{};
    wr.wr_id = id;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ops().post_recv(b->qp(q), &wr, &bad), 0);
  }
  // Every completion on side's CQ (polling delivers what is pending).
  std::vector<ibv_wc> poll(int side) {
    std::vector<ibv_wc> out;
    ibv_wc wc[8];
    for (int round = 0; round < 100; ++round) {
      int n = ops().poll_cq((side ? b : a)->cq(), 8, wc);
      if (n <= 0) break;
      out.insert(out.end(), wc, wc + n);
    }
    return out;
  }
  std::vector<Port> ports;
  std::unique_ptr<QpSet> a, b;
};

class IbFabric : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(fabric.misuse().empty()) << fabric.misuse().front(); }
  FakeFabric fabric{{fake::ibDevice("mlx5_0"), fake::ibDevice("mlx5_1")}};
  std::vector<uint8_t> src = randomBytes(3 * 4096, 1), dst = std::vector<uint8_t>(3 * 4096, 0);
};

TEST_F(IbFabric, WriteWithImmediateLandsAndTakesAReceive) {
  Link l(fabric, 1, true);
  ibv_mr* s = l.reg(0, src.data(), src.size(), 0);
  ibv_mr* d = l.reg(1, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_TRUE(s && d);
  l.recv0(0, 5);
  l.write(0, s, reinterpret_cast<uintptr_t>(dst.data()) + 100, d->rkey, 5000, true, 0xabc);
  auto a = l.poll(0), b = l.poll(1);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(a[0].opcode, IBV_WC_RDMA_WRITE);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(b[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(b[0].wr_id, 5u);
  EXPECT_EQ(b[0].byte_len, 5000u);
  EXPECT_TRUE(b[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(b[0].imm_data), 0xabcu);
  EXPECT_EQ(memcmp(dst.data() + 100, src.data(), 5000), 0);
  EXPECT_EQ(dst[99], 0);
  EXPECT_EQ(dst[5100], 0);
  auto t = fabric.traffic();
  EXPECT_EQ(t.writes, 1u);
  EXPECT_EQ(t.writesWithImm, 1u);
  EXPECT_EQ(t.writeBytes, 5000u);
  l.ops().dereg_mr(s);
  l.ops().dereg_mr(d);
}

TEST_F(IbFabric, WriteOutsideTheRegionIsARemoteAccessErrorForBothQps) {
  Link l(fabric, 1, true);
  ibv_mr* s = l.reg(0, src.data(), src.size(), 0);
  ibv_mr* d = l.reg(1, dst.data(), 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  l.recv0(0, 9);
  // One byte past the region's end.
  l.write(0, s, reinterpret_cast<uintptr_t>(dst.data()) + 1, d->rkey, 4096, false);
  auto a = l.poll(0), b = l.poll(1);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(l.a->qp()->state, IBV_QPS_ERR);
  EXPECT_EQ(l.b->qp()->state, IBV_QPS_ERR);
  ASSERT_EQ(b.size(), 1u);  // the receive posted there is flushed
  EXPECT_EQ(b[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), long(dst.size())) << "nothing written";
  l.ops().dereg_mr(s);
  l.ops().dereg_mr(d);
}

TEST_F(IbFabric, WriteNeedsRemoteRightsOnTheRegionAndTheQp) {
  {
    Link l(fabric, 1, true);
    ibv_mr* s = l.reg(0, src.data(), src.size(), 0);
    ibv_mr* d = l.reg(1, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);  // no remote write
    l.write(0, s, reinterpret_cast<uintptr_t>(dst.data()), d->rkey, 64, false);
    EXPECT_EQ(l.poll(0).at(0).status, IBV_WC_REM_ACCESS_ERR);
    l.ops().dereg_mr(s);
    l.ops().dereg_mr(d);
  }
  {
    Link l(fabric, 1, false);  // the target QP grants no remote access
    ibv_mr* s = l.reg(0, src.data(), src.size(), 0);
    ibv_mr* d = l.reg(1, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    l.write(0, s, reinterpret_cast<uintptr_t>(dst.data()), d->rkey, 64, false);
    EXPECT_EQ(l.poll(0).at(0).status, IBV_WC_REM_ACCESS_ERR);
    l.ops().dereg_mr(s);
    l.ops().dereg_mr(d);
  }
  EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), long(dst.size()));
}

TEST_F(IbFabric, WriteWithImmediateAndNoReceiveIsReceiverNotReady) {
  Link l(fabric, 1, true);
  ibv_mr* s = l.reg(0, src.data(), src.size(), 0);
  ibv_mr* d = l.reg(1, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  l.write(0, s, reinterpret_cast<uintptr_t>(dst.data()), d->rkey, 64, true);
  EXPECT_EQ(l.poll(0).at(0).status, IBV_WC_RNR_RETRY_EXC_ERR);
  l.ops().dereg_mr(s);
  l.ops().dereg_mr(d);
}

// What makes a registration cache necessary to check: the pinned pages are not the
// program's after a free and reuse, so a write through the old MR is lost.
TEST_F(IbFabric, PinnedRegistrationGoesStaleWhenPagesAreReplaced) {
  Link l(fabric, 1, true);
  ibv_mr* s = l.reg(0, src.data(), src.size(), 0);
  ibv_mr* d = l.reg(1, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  fabric.replacePages(dst.data(), dst.size());
  l.write(0, s, reinterpret_cast<uintptr_t>(dst.data()), d->rkey, dst.size(), false);
  EXPECT_EQ(l.poll(0).at(0).status, IBV_WC_SUCCESS) << "the NIC cannot tell";
  EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), long(dst.size())) << "the data went to the old pages";
  l.ops().dereg_mr(s);
  l.ops().dereg_mr(d);
}

TEST(IbFabricOdp, OnDemandRegistrationFollowsReplacedPages) {
  fake::FakeDevice d0 = fake::ibDevice("mlx5_0"), d1 = fake::ibDevice("mlx5_1");
  d0.odp = d1.odp = true;
  FakeFabric fabric({d0, d1});
  std::vector<uint8_t> src = randomBytes(8192, 2), dst(8192, 0);
  Link l(fabric, 1, true);
  ibv_mr* s = l.reg(0, src.data(), src.size(), IBV_ACCESS_ON_DEMAND);
  ibv_mr* d = l.reg(1, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND);
  ASSERT_TRUE(s && d);
  fabric.replacePages(dst.data(), dst.size());
  fabric.replacePages(src.data(), src.size());
  l.write(0, s, reinterpret_cast<uintptr_t>(dst.data()), d->rkey, dst.size(), false);
  EXPECT_EQ(l.poll(0).at(0).status, IBV_WC_SUCCESS);
  EXPECT_EQ(src, dst);
  l.ops().dereg_mr(s);
  l.ops().dereg_mr(d);
}

TEST_F(IbFabric, ShuffledDeliveryKeepsEachQpsOrderOnly) {
  fabric.setShuffle(7);
  Link l(fabric, 4, true);
  ibv_mr* s = l.reg(0, src.data(), src.size(), 0);
  ibv_mr* d = l.reg(1, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  constexpr int kPerQp = 12;
  for (int i = 0; i < kPerQp; ++i)
    for (uint32_t q = 0; q < 4; ++q) {
      l.recv0(q, q);
      l.write(q, s, reinterpret_cast<uintptr_t>(dst.data()), d->rkey, 0, true, q * 100 + uint32_t(i));
    }
  std::vector<ibv_wc> got;
  for (int round = 0; round < 1000 && got.size() < 4 * kPerQp; ++round) {
    auto b = l.poll(1);
    got.insert(got.end(), b.begin(), b.end());
  }
  ASSERT_EQ(got.size(), size_t(4 * kPerQp));
  std::vector<int> next(4, 0);
  bool reordered = false;
  for (size_t k = 0; k < got.size(); ++k) {
    uint32_t v = ntohl(got[k].imm_data), q = v / 100, i = v % 100;
    EXPECT_EQ(int(i), next[q]++) << "queue pair " << q << " out of its order";
    if (k > 0 && q != (k % 4)) reordered = true;
  }
  EXPECT_TRUE(reordered) << "completions of different QPs came in post order";
  l.poll(0);
  l.ops().dereg_mr(s);
  l.ops().dereg_mr(d);
}

}  // namespace
}  // namespace coll::net::ib::test
