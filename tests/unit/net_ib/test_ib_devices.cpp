// InfiniBand backend: discovery with the real libibverbs (no RDMA NIC here) and with the
// fake fabric: devices, properties, COLL_IB_HCA, GID choice, init/finalize cycles.
#include "base/error.hpp"
#include "ib_harness.hpp"
#include "transport/net/ib/ib_devices.hpp"

namespace coll::net::ib::test {
namespace {

using fake::FakeFabric;

TEST(IbReal, InitFailsClearlyWithoutDevices) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list) ibv_free_device_list(list);
  if (n > 0) GTEST_SKIP() << "this machine has " << n << " RDMA devices";
  Backend b(nullptr);
  EXPECT_NE(b.rc, 0);
  EXPECT_EQ(b.ctx, nullptr);
  EXPECT_EQ(b.error(),
            "InfiniBand: libibverbs lists no devices (no RDMA NIC, or its kernel driver is not loaded)");
  // The other entries refuse a missing context instead of crashing.
  int ndev = -1;
  EXPECT_NE(b.p->devices(nullptr, &ndev), 0);
  EXPECT_TRUE(contains(b.error(), "context is NULL")) << b.error();
  char handle[COLL_NET_HANDLE_BYTES];
  void* l = nullptr;
  EXPECT_NE(b.p->listen(nullptr, 0, handle, &l), 0);
  EXPECT_NE(b.p->closeSend(nullptr), 0);
  b.p->finalize(nullptr);
  EXPECT_STREQ(b.p->name, "ib");
  EXPECT_EQ(b.p->version, COLL_NET_PLUGIN_VERSION);
}

FakeFabric twoDevices() {
  auto d1 = fake::ibDevice("mlx5_1", 2);
  d1.ports[1].state = IBV_PORT_DOWN;
  d1.ports[0].speed = 64;  // HDR
  d1.ports[0].width = 2;   // 4x
  return FakeFabric({fake::ibDevice("mlx5_0"), d1});
}

TEST(IbFake, DevicesAndProperties) {
  FakeFabric f = twoDevices();
  Backend b(&f);
  ASSERT_EQ(b.rc, 0) << b.error();
  int n = 0;
  ASSERT_EQ(b.p->devices(b.ctx, &n), 0);
  ASSERT_EQ(n, 2);
  collNetProperties_t pr;
  ASSERT_EQ(b.p->getProperties(b.ctx, 0, &pr), 0);
  EXPECT_STREQ(pr.name, "mlx5_0:1");
  EXPECT_STREQ(pr.pciPath, "");  // no sysfs entry for a fake device
  EXPECT_EQ(pr.speedMbps, 100000);
  EXPECT_GT(pr.latencyUs, 0);
  EXPECT_GE(pr.maxRequests, 1);
  ASSERT_EQ(b.p->getProperties(b.ctx, 1, &pr), 0);
  EXPECT_STREQ(pr.name, "mlx5_1:1");
  EXPECT_EQ(pr.speedMbps, 200000);
  EXPECT_NE(b.p->getProperties(b.ctx, 2, &pr), 0);
  EXPECT_TRUE(contains(b.error(), "device 2 does not exist (2 devices)")) << b.error();
  EXPECT_NE(b.p->getProperties(b.ctx, -1, &pr), 0);
  EXPECT_NE(b.p->getProperties(b.ctx, 0, nullptr), 0);
}

TEST(IbFake, HcaFilter) {
  FakeFabric f = twoDevices();
  // The one port COLL_IB_HCA=hca leaves.
  auto onlyPort = [&](const char* hca) {
    Backend b(&f, {{"COLL_IB_HCA", hca}});
    EXPECT_EQ(b.rc, 0) << b.error();
    int n = 0;
    collNetProperties_t pr{};
    if (b.rc == 0 && b.p->devices(b.ctx, &n) == 0 && n == 1) b.p->getProperties(b.ctx, 0, &pr);
    EXPECT_EQ(n, 1) << hca;
    return std::string(pr.name);
  };
  EXPECT_EQ(onlyPort("mlx5_1"), "mlx5_1:1");
  EXPECT_EQ(onlyPort("^mlx5_1"), "mlx5_0:1");
  {
    Backend b(&f, {{"COLL_IB_HCA", "mlx5_1:2"}});
    EXPECT_NE(b.rc, 0);
    EXPECT_EQ(b.error(), "InfiniBand: no ACTIVE port on mlx5_1 (port 2: DOWN)");
  }
  {
    Backend b(&f, {{"COLL_IB_HCA", "mlx9_0,mlx5_0:3"}});
    EXPECT_NE(b.rc, 0);
    EXPECT_EQ(b.error(), "InfiniBand: COLL_IB_HCA=mlx9_0,mlx5_0:3 matches none of: mlx5_0, mlx5_1");
  }
  {
    Backend b(&f, {{"COLL_IB_HCA", "mlx5_0:x"}});
    EXPECT_NE(b.rc, 0);
    EXPECT_TRUE(contains(b.error(), "'mlx5_0:x' has no valid port number")) << b.error();
  }
  auto flt = parseHcaFilter("^a:2,b");
  EXPECT_TRUE(flt.exclude);
  EXPECT_TRUE(flt.keeps("a", 1));
  EXPECT_FALSE(flt.keeps("a", 2));
  EXPECT_FALSE(flt.keeps("b", 1));
  EXPECT_TRUE(flt.keeps("c", 1));
  EXPECT_THROW(parseHcaFilter("a,,b"), coll::Error);
  EXPECT_TRUE(parseHcaFilter("").keeps("x", 1));
}

TEST(IbFake, NoUsablePortSaysWhy) {
  auto d0 = fake::ibDevice("mlx5_0", 2);
  d0.ports[0].state = IBV_PORT_DOWN;
  d0.ports[1].state = IBV_PORT_INIT;
  auto d1 = fake::ibDevice("mlx5_1");
  d1.openFails = true;
  auto d2 = fake::roceDevice("mlx5_2", {fake::FakeGid{}});  // every GID empty
  FakeFabric f({d0, d1, d2});
  Backend b(&f);
  EXPECT_NE(b.rc, 0);
  EXPECT_EQ(b.error(),
            "InfiniBand: no ACTIVE port on mlx5_0 (port 1: DOWN, port 2: INIT), mlx5_1 (cannot open "
            "it: Permission denied (errno 13)), mlx5_2 (port 1: RoCE, but none of its 1 GIDs is set (no IP "
            "address on the interface?))");
  EXPECT_EQ(f.live().contexts, 0);  // nothing left open
}

TEST(IbFake, NoDevicesWithFake) {
  FakeFabric f({});
  Backend b(&f);
  EXPECT_NE(b.rc, 0);
  EXPECT_TRUE(contains(b.error(), "libibverbs lists no devices")) << b.error();
}

TEST(IbFake, BadTunables) {
  FakeFabric f = twoDevices();
  struct Case {
    std::string env, value, env2, value2, message;
  };
  const Case cases[] = {
      {"COLL_IB_CHUNK", "10", "", "", "COLL_IB_CHUNK=10 is outside"},
      {"COLL_IB_SLOTS", "0", "", "", "COLL_IB_SLOTS=0 is outside"},
      {"COLL_IB_TIMEOUT", "x", "", "", "COLL_IB_TIMEOUT='x' is not an integer"},
      {"COLL_IB_CHUNK", "64M", "COLL_IB_SLOTS", "17", "per connection is over 1 GiB"},
  };
  for (const Case& k : cases) {
    ConfigOverrides tunables = {{k.env, k.value}};
    if (!k.env2.empty()) tunables.emplace_back(k.env2, k.value2);
    Backend b(&f, tunables);
    EXPECT_NE(b.rc, 0) << k.env << "=" << k.value;
    EXPECT_TRUE(contains(b.error(), k.message)) << b.error();
  }
}

// RoCE: the GID table decides the source address.
TEST(IbFake, RoceGidChoice) {
  std::vector<fake::FakeGid> table = {
      fake::FakeGid{},                                        // 0: empty
      fake::linkLocalGid(0x1234, IBV_GID_TYPE_ROCE_V1),       // 1
      fake::linkLocalGid(0x1234, IBV_GID_TYPE_ROCE_V2),       // 2
      fake::ipv4Gid(10, 0, 0, 1, IBV_GID_TYPE_ROCE_V1),       // 3
      fake::ipv4Gid(10, 0, 0, 1, IBV_GID_TYPE_ROCE_V2),       // 4
  };
  FakeFabric f({fake::roceDevice("rocep1s0", table)});
  auto pick = [&](int wanted, std::string* why) {
    ibv_gid g{};
    Device dev;
    dev.ops = f.ops();
    ibv_device** list = f.ops()->get_device_list(nullptr);
    dev.ctx = f.ops()->open_device(list[0]);
    f.ops()->free_device_list(list);
    int i = pickGid(*f.ops(), dev.ctx, 1, int(table.size()), wanted, &g, why);
    if (i >= 0) {
      EXPECT_EQ(memcmp(g.raw, table[size_t(i)].gid.raw, 16), 0);
    }
    return i;
  };
  std::string why;
  EXPECT_EQ(pick(-1, &why), 4);
  EXPECT_EQ(pick(2, &why), 2);
  EXPECT_EQ(pick(0, &why), -1);
  EXPECT_EQ(why, "COLL_IB_GID_INDEX=0 names an empty GID");
  EXPECT_EQ(pick(7, &why), -1);
  EXPECT_EQ(why, "COLL_IB_GID_INDEX=7 is past the GID table (5 entries)");

  // Without GID types (old kernels) an IPv4-mapped GID still wins over link-local.
  auto dev = fake::roceDevice("rocep2s0", {table[0], table[2], table[4]});
  dev.ports[0].gidEx = false;
  FakeFabric f2({dev});
  auto ports = discoverPorts(*f2.ops(), {});
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0].gidIndex, 2);
  EXPECT_TRUE(ports[0].roce());
  Backend b(&f2, {{"COLL_IB_GID_INDEX", "1"}});
  ASSERT_EQ(b.rc, 0) << b.error();
}

TEST(IbFake, InitAgainAfterFinalize) {
  FakeFabric f = twoDevices();
  for (int i = 0; i < 3; ++i) {
    Backend b(&f);
    ASSERT_EQ(b.rc, 0) << b.error();
    EXPECT_EQ(f.live().contexts, 2);
    EXPECT_EQ(f.live().pds, 2);
  }
  EXPECT_EQ(f.live().contexts, 0);
  EXPECT_EQ(f.live().pds, 0);
  EXPECT_TRUE(f.misuse().empty());
}

TEST(IbSpeed, Table) {
  EXPECT_EQ(portSpeedMbps(1, 1), 2500);
  EXPECT_EQ(portSpeedMbps(16, 2), 56000);
  EXPECT_EQ(portSpeedMbps(128, 2), 400000);
  EXPECT_EQ(portSpeedMbps(3, 2), 0);
  EXPECT_EQ(portSpeedMbps(32, 3), 0);
}

}  // namespace
}  // namespace coll::net::ib::test
