// Connections over several ports (COLL_IB_PORTS) on the fake fabric: which ports a
// connection takes, the handle's port list and its checks, zero-copy stripes carried by
// every port (two devices, or two ports of one device), a registration on each device
// and cache hits on each, a peer with fewer ports, bad values of the tunable, and a port
// that goes down mid-transfer.
#include "ib_drive.hpp"
#include "transport/net/ib/ib_counters.hpp"
#include "transport/net/ib/ib_devices.hpp"
#include "transport/net/ib/ib_wire.hpp"

namespace coll::net::ib::test {
namespace {

using fake::FakeFabric;

class IbPorts : public ::testing::Test {
 protected:
  void TearDown() override {
    auto c = fabric.live();
    EXPECT_EQ(c.qps + c.mrs + c.cqs + c.pds + c.contexts, 0);
    EXPECT_TRUE(fabric.misuse().empty()) << fabric.misuse().front();
  }
  FakeFabric fabric{{fake::ibDevice("mlx5_0"), fake::ibDevice("mlx5_1")}};
};

std::vector<Port> fakePorts(const std::vector<std::pair<std::string, std::string>>& devTree) {
  std::vector<Port> ports;
  std::map<std::string, std::shared_ptr<Device>> devs;
  for (const auto& [dev, tree] : devTree) {
    auto& d = devs[dev];
    if (!d) d = std::make_shared<Device>();
    Port p;
    p.dev = d;
    p.name = dev;
    p.pciTree = tree;
    ports.push_back(p);
  }
  return ports;
}

TEST(PortsNear, OwnDeviceThenClosestInThePciTreeThenIndex) {
  auto ports = fakePorts({{"a", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"},
                          {"b", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0"},
                          {"c", "/sys/devices/pci0000:00/0000:00:01.0/0000:02:00.0"},
                          {"a", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"},
                          {"d", "/sys/devices/pci0000:00/0000:00:03.0/0000:05:00.0"}});
  EXPECT_EQ(portsNear(ports, 0, 1), (std::vector<size_t>{0}));
  // a's second port, then c (same bridge), d (same root), b (another root).
  EXPECT_EQ(portsNear(ports, 0, 5), (std::vector<size_t>{0, 3, 2, 4, 1}));
  EXPECT_EQ(portsNear(ports, 1, 3), (std::vector<size_t>{1, 0, 2}));
  EXPECT_EQ(portsNear(ports, 2, 9).size(), 5u) << "no more than there are";
  // Only ports of the first one's link layer.
  ports[3].linkLayer = IBV_LINK_LAYER_ETHERNET;
  EXPECT_EQ(portsNear(ports, 0, 5), (std::vector<size_t>{0, 2, 4, 1}));
}

TEST_F(IbPorts, BadValuesAreClearErrorsNamingTheTunable) {
  for (const char* v : {"0", "5", "-1", "two"}) {
    Backend b(&fabric, {{"COLL_IB_PORTS", v}});
    EXPECT_NE(b.rc, 0) << v;
    EXPECT_TRUE(contains(b.error(), "COLL_IB_PORTS")) << v << ": " << b.error();
  }
  {
    Backend b(&fabric, {{"COLL_IB_PORTS", "3"}});
    EXPECT_NE(b.rc, 0);
    EXPECT_TRUE(contains(b.error(), "COLL_IB_PORTS=3") && contains(b.error(), "2 usable")) << b.error();
  }
  {
    Backend b(&fabric, {{"COLL_IB_PORTS", "2"}, {"COLL_IB_HCA", "mlx5_1"}});
    EXPECT_NE(b.rc, 0);
    EXPECT_TRUE(contains(b.error(), "COLL_IB_PORTS=2") && contains(b.error(), "COLL_IB_HCA=mlx5_1")) << b.error();
  }
  {
    Backend b(&fabric, {{"COLL_IB_PORTS", "2"}, {"COLL_IB_QPS", "9"}});
    EXPECT_NE(b.rc, 0);
    EXPECT_TRUE(contains(b.error(), "COLL_IB_PORTS=2 x COLL_IB_QPS=9")) << b.error();
  }
}

// The handle names a port per queue pair; one port leaves the bytes after ConnInfo zero,
// as before ports were added.
TEST_F(IbPorts, HandlesListThePortsAndAreCheckedStrictly) {
  for (const char* k : {"1", "2"}) {
    Backend b(&fabric, {{"COLL_IB_PORTS", k}, {"COLL_IB_QPS", "2"}});
    ASSERT_EQ(b.rc, 0) << b.error();
    char handle[COLL_NET_HANDLE_BYTES];
    void* listen = nullptr;
    ASSERT_EQ(b.p->listen(b.ctx, 0, handle, &listen), 0) << b.error();
    ConnInfo c;
    PeerPorts where;
    ASSERT_EQ(checkConnInfo(handle, kConnHandle, &c, &where), "");
    ConnPorts x;
    memcpy(&x, handle + sizeof(ConnInfo), sizeof(x));
    if (std::string(k) == "1") {
      EXPECT_EQ(c.nqps, 2u);
      EXPECT_EQ(where.nports, 1u);
      for (size_t i = sizeof(ConnInfo); i < sizeof(handle); ++i) ASSERT_EQ(handle[i], 0) << i;
    } else {
      EXPECT_EQ(c.nqps, 4u);
      EXPECT_EQ(where.nports, 2u);
      EXPECT_EQ(std::string(c.port), "mlx5_0:1");
      EXPECT_EQ(std::string(where.ports[1].port), "mlx5_1:1");
      EXPECT_EQ((std::vector<int>(where.qpPort, where.qpPort + 4)), (std::vector<int>{0, 1, 0, 1}));
      auto bad = [&](auto&& spoil, const char* says) {
        char h[COLL_NET_HANDLE_BYTES];
        memcpy(h, handle, sizeof h);
        ConnPorts y = x;
        spoil(y);
        memcpy(h + sizeof(ConnInfo), &y, sizeof(y));
        ConnInfo out;
        std::string why = checkConnInfo(h, kConnHandle, &out);
        EXPECT_TRUE(contains(why, says)) << "'" << why << "' should say '" << says << "'";
      };
      bad([](ConnPorts& y) { y.magic = 7; }, "unknown bytes after its connection info");
      bad([](ConnPorts& y) { y.version = 9; }, "port list has version 9");
      bad([](ConnPorts& y) { y.bytes = 3; }, "laid out in 3 bytes");
      bad([](ConnPorts& y) { y.nports = 5; }, "names 5 ports");
      bad([](ConnPorts& y) { y.nports = 1; }, "names 1 ports");
      bad([](ConnPorts& y) { y.qpPort[3] = 2; }, "puts queue pair 3 on port 2 of 2");
      bad([](ConnPorts& y) { y.qpPort[9] = 1; }, "names a port for queue pair 9 of 4");
      bad([](ConnPorts& y) { y.qpPort[0] = 1; }, "puts its first queue pair on port 1");
      bad([](ConnPorts& y) { y.qpPort[1] = y.qpPort[3] = 0; }, "names port 1, which carries none");
      bad([](ConnPorts& y) { y.ports[0].mtu = 0; }, "invalid MTU code 0 for its port 1");
      bad([](ConnPorts& y) { y.ports[0].linkLayer = IBV_LINK_LAYER_ETHERNET; }, "mixes link layers");
    }
    EXPECT_EQ(b.p->closeListen(listen), 0) << b.error();
  }
}

struct Share {
  uint64_t a, b;
};
Share sent(const FakeFabric& f, const char* a, int pa, const char* b, int pb) {
  return {f.portBytes(a, pa), f.portBytes(b, pb)};
}

// Two devices, a port each: a large message's stripes leave from both, its buffers are
// registered on both devices, and a second round hits both devices' caches.
TEST_F(IbPorts, LargeMessagesUseBothDevicesAndTheirCaches) {
  Backend b(&fabric, {{"COLL_IB_PORTS", "2"}});
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 1);
  const size_t n = 8 << 20;
  auto msgs = makeMsgs({n, n}, {}, 3);
  for (int round = 0; round < 2; ++round) {
    CacheStats c0 = contextCacheStats(b.ctx, 0), c1 = contextCacheStats(b.ctx, 1);
    Share before = sent(fabric, "mlx5_0", 1, "mlx5_1", 1);
    for (auto& m : msgs) {
      std::fill(m.dst.begin(), m.dst.end(), kGuardByte);
      m.sdone = m.rdone = false;
    }
    Stats st;
    driveBoth(b, pr, msgs, &st);
    checkMsgs(msgs);
    Share after = sent(fabric, "mlx5_0", 1, "mlx5_1", 1);
    const uint64_t a = after.a - before.a, bb = after.b - before.b;
    EXPECT_GE(a + bb, 2 * n);
    EXPECT_GE(a, (a + bb) * 3 / 10) << "mlx5_0:1 carried " << a << " of " << a + bb;
    EXPECT_GE(bb, (a + bb) * 3 / 10) << "mlx5_1:1 carried " << bb << " of " << a + bb;
    CacheStats d0 = contextCacheStats(b.ctx, 0), d1 = contextCacheStats(b.ctx, 1);
    if (round == 0) {
      // Each buffer, sent and received, on each device.
      EXPECT_EQ(d0.misses - c0.misses, 4u);
      EXPECT_EQ(d1.misses - c1.misses, 4u);
    } else {
      EXPECT_EQ(d0.hits - c0.hits, 4u) << "cache hits on mlx5_0";
      EXPECT_EQ(d1.hits - c1.hits, 4u) << "cache hits on mlx5_1";
      EXPECT_EQ(d0.misses, c0.misses);
      EXPECT_EQ(d1.misses, c1.misses);
    }
  }
  closePair(b, pr);
}

// Two ports of one device share its PD: one registration per buffer, both ports carry.
TEST(IbPortsOneDevice, TwoPortsOfOneDeviceShareTheRegistration) {
  FakeFabric fabric{{fake::ibDevice("mlx5_0", 2)}};
  {
    Backend b(&fabric, {{"COLL_IB_PORTS", "2"}, {"COLL_IB_QPS", "2"}});
    ASSERT_EQ(b.rc, 0) << b.error();
    Pair pr = connectPair(b, 0, 1);
    const int regs = fabric.registrations();
    auto msgs = makeMsgs({(4 << 20) + 123}, {}, 4);
    Stats st;
    driveBoth(b, pr, msgs, &st);
    checkMsgs(msgs);
    EXPECT_EQ(fabric.registrations() - regs, 2) << "the send and the receive buffer, once each";
    Share s = sent(fabric, "mlx5_0", 1, "mlx5_0", 2);
    EXPECT_GE(s.a, (s.a + s.b) * 3 / 10);
    EXPECT_GE(s.b, (s.a + s.b) * 3 / 10);
    closePair(b, pr);
  }
  EXPECT_TRUE(fabric.misuse().empty()) << fabric.misuse().front();
}

// A side on one port talking to one on two, both ways round, with shuffled delivery:
// the side with fewer ports puts the connection's queue pairs on the ports it has.
TEST_F(IbPorts, APeerWithFewerPortsPairsRoundRobin) {
  fabric.setShuffle(7);
  Backend two(&fabric, {{"COLL_IB_PORTS", "2"}});
  Backend one(&fabric, {{"COLL_IB_PORTS", "1"}});
  ASSERT_EQ(two.rc, 0) << two.error();
  ASSERT_EQ(one.rc, 0) << one.error();
  for (bool twoReceives : {true, false}) {
    SCOPED_TRACE(twoReceives ? "one port sends to two" : "two ports send to one");
    const Backend& rx = twoReceives ? two : one;
    const Backend& tx = twoReceives ? one : two;
    char handle[COLL_NET_HANDLE_BYTES], reply[COLL_NET_HANDLE_BYTES];
    void *listen = nullptr, *send = nullptr, *recv = nullptr;
    ASSERT_EQ(rx.p->listen(rx.ctx, 1, handle, &listen), 0) << rx.error();
    ASSERT_EQ(tx.p->connect(tx.ctx, 0, handle, reply, &send), 0) << tx.error();
    ASSERT_EQ(rx.p->accept(listen, reply, &recv), 0) << rx.error();
    ConnInfo c;
    PeerPorts where;
    ASSERT_EQ(checkConnInfo(reply, kConnReply, &c, &where), "");
    EXPECT_EQ(c.nqps, twoReceives ? 2u : 1u);
    EXPECT_EQ(where.nports, 1u) << "one port on the sender, or one queue pair to put on a port";
    auto msgs = makeMsgs({100, 1 << 20, 5 << 20, 77777}, {}, twoReceives ? 5 : 6);
    Stats st;
    Side s(tx, send, msgs, true, &st.nullSends), r(rx, recv, msgs, false, &st.nullRecvs);
    drive({&s, &r});
    checkMsgs(msgs);
    EXPECT_EQ(tx.p->closeSend(send), 0);
    EXPECT_EQ(rx.p->closeRecv(recv), 0);
  }
}

// The second port goes down mid-transfer: the sender's stripe on it fails with an error
// that names that port and the cause, promptly, instead of the transfer hanging.
TEST_F(IbPorts, APortThatGoesDownFailsTheTransferNamingIt) {
  Backend b(&fabric, {{"COLL_IB_PORTS", "2"}});
  ASSERT_EQ(b.rc, 0) << b.error();
  Pair pr = connectPair(b, 0, 0);  // both ends on mlx5_0 first, mlx5_1 second
  auto ok = makeMsgs({2 << 20}, {}, 8);
  Stats st;
  driveBoth(b, pr, ok, &st);
  checkMsgs(ok);
  const size_t n = 6 << 20;
  auto src = randomBytes(n, 9);
  std::vector<uint8_t> dst(n);
  void *sreq = nullptr, *rreq = nullptr;
  ASSERT_EQ(b.p->irecv(pr.recv, dst.data(), n, &rreq), 0) << b.error();
  ASSERT_EQ(b.p->isend(pr.send, src.data(), n, 1, &sreq), 0) << b.error();
  ASSERT_TRUE(sreq && rreq);
  fabric.setPortState("mlx5_1", 1, IBV_PORT_DOWN);
  auto t0 = Clock::now();
  int rc = 0, done = 0;
  while (rc == 0 && !done && Clock::now() - t0 < std::chrono::seconds(20)) {
    int rdone = 0;
    b.p->test(rreq, &rdone, nullptr, nullptr);
    rc = b.p->test(sreq, &done, nullptr, nullptr);
  }
  EXPECT_NE(rc, 0) << "the send completed over a port that is down";
  EXPECT_FALSE(done);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5);
  const std::string e = b.error();
  EXPECT_TRUE(contains(e, "mlx5_1:1") && contains(e, "RDMA write") && contains(e, "retry")) << e;
  closePair(b, pr);
  fabric.setPortState("mlx5_1", 1, IBV_PORT_ACTIVE);
}

}  // namespace
}  // namespace coll::net::ib::test
