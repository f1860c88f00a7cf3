// Pure parts of the topology: path classification on a hand-built host, NIC choice,
// link-cost tables and their overrides, text helpers. Runs with or without hwloc.
#include <gtest/gtest.h>

#include "base/config.hpp"
#include "topology/topology.hpp"
#include "topo_test_util.hpp"

namespace coll {
namespace {

using test::expectError;

PciHop hop(uint64_t id, bool host = false) { return {id, host, "h" + std::to_string(id)}; }

// Two sockets; socket 0 has NUMA nodes 0 and 1, socket 1 has node 2.
//   host bridge 1 (numa 0): switch 2 -> gpu0, gpu1, nic1 (RoCE); root port 3 -> gpu2
//   host bridge 4 (numa 1): gpu3          host bridge 6 (numa 2): gpu4, nic0 (Ethernet)
HostTopo handBuilt() {
  HostTopo t;
  t.detailed = true;
  t.hostname = "hand";
  t.packages = {{0, {0, 1, 2, 3}, 4, ""}, {1, {4, 5, 6, 7}, 4, ""}};
  t.numas = {{0, 0, {0, 1}, 1 << 30, "", ""}, {1, 0, {2, 3}, 1 << 30, "", ""},
             {2, 1, {4, 5, 6, 7}, 1 << 30, "", ""}};
  auto gpu = [](std::vector<PciHop> path, int numa, int pkg) {
    GpuInfo g;
    g.pciPath = std::move(path);
    g.loc = {pkg, numa};
    return g;
  };
  t.gpus = {gpu({hop(1, true), hop(2)}, 0, 0), gpu({hop(1, true), hop(2)}, 0, 0), gpu({hop(1, true), hop(3)}, 0, 0),
            gpu({hop(4, true)}, 1, 0), gpu({hop(6, true)}, 2, 1)};
  NicInfo eth;
  eth.name = "eth0";
  eth.kind = NicKind::Eth;
  eth.speedMbps = 25000;
  eth.loc = {1, 2};
  eth.pciPath = {hop(6, true)};
  NicInfo roce;
  roce.name = "mlx5_0";
  roce.kind = NicKind::Roce;
  roce.speedMbps = 100000;
  roce.loc = {0, 0};
  roce.pciPath = {hop(1, true), hop(2)};
  t.nics = {eth, roce};
  return t;
}

TEST(TopoPaths, ClassifyHandBuiltHost) {
  HostTopo t = handBuilt();
  auto gg = [&](int a, int b) { return classify(t, DevRef::gpu(a), DevRef::gpu(b)); };
  EXPECT_EQ(gg(0, 0), PathClass::Self);
  EXPECT_EQ(gg(0, 1), PathClass::PciSwitch);
  EXPECT_EQ(gg(0, 2), PathClass::HostBridge);
  EXPECT_EQ(gg(0, 3), PathClass::Package);
  EXPECT_EQ(gg(3, 4), PathClass::CrossSocket);
  EXPECT_EQ(classify(t, DevRef::gpu(4), DevRef::nic(0)), PathClass::HostBridge);
  EXPECT_EQ(classify(t, DevRef::numa(2), DevRef::nic(0)), PathClass::Numa);
  EXPECT_EQ(classify(t, DevRef::numa(0), DevRef::numa(1)), PathClass::Package);
  EXPECT_EQ(classify(t, DevRef::package(0), DevRef::gpu(3)), PathClass::Package);
  t.nvlinkGBs.assign(5, std::vector<double>(5, 0.0));
  t.nvlinkGBs[0][4] = t.nvlinkGBs[4][0] = 50;
  EXPECT_EQ(gg(4, 0), PathClass::NVLink);
  expectError([&] { classify(t, DevRef::gpu(9), DevRef::gpu(0)); }, collInvalidArgument, {"GPU index 9", "5"});
  expectError([&] { classify(t, DevRef::nic(0), DevRef::nic(-1)); }, collInvalidArgument, {"NIC index -1"});
}

TEST(TopoPaths, NicChoice) {
  HostTopo t = handBuilt();
  EXPECT_EQ(chooseNic(t, DevRef::gpu(0), 0), 1);   // below the same switch
  // An RDMA port beats a plain Ethernet one, even a closer one (same host bridge).
  EXPECT_EQ(chooseNic(t, DevRef::gpu(4), 0), 1);
  EXPECT_EQ(chooseNic(t, DevRef::numa(2), 0), 1);
  // Equal paths: RDMA before Ethernet even when the Ethernet port is faster.
  t.nics[0].loc = t.nics[1].loc;
  t.nics[0].pciPath = t.nics[1].pciPath;
  EXPECT_EQ(chooseNic(t, DevRef::host(), 0), 1);
  t.nics[0].speedMbps = 200000;
  EXPECT_EQ(chooseNic(t, DevRef::host(), 0), 1);
  t.nics[0].kind = NicKind::Ib;  // two fabric ports: the faster, then a true tie spread by tieBreak
  EXPECT_EQ(chooseNic(t, DevRef::host(), 0), 0);
  t.nics[0].speedMbps = 100000;
  EXPECT_EQ(chooseNic(t, DevRef::host(), 0), 0);
  EXPECT_EQ(chooseNic(t, DevRef::host(), 1), 1);
  EXPECT_EQ(chooseNic(t, DevRef::host(), -1), 1);
  t.nics.clear();
  EXPECT_EQ(chooseNic(t, DevRef::host(), 0), -1);
}

// Two fabric ports, one next to the rank and one a socket away: the near one unless the far
// one carries more than twice as much; a port whose capacity is unknown stays comparable.
TEST(TopoPaths, NicChoiceComparableCapacity) {
  HostTopo t = handBuilt();
  t.nics[0].kind = NicKind::Ib;  // eth0 made an HCA on NUMA node 2 (socket 1)
  t.nics[0].speedMbps = 200000;
  t.nics[1].speedMbps = 100000;  // mlx5_0 on NUMA node 0
  EXPECT_EQ(chooseNic(t, DevRef::numa(0), 0), 1) << "twice as fast is still comparable: locality decides";
  t.nics[0].speedMbps = 400000;
  EXPECT_EQ(chooseNic(t, DevRef::numa(0), 0), 0) << "more than twice as fast";
  t.nics[1].speedMbps = 0;  // unknown, and no PCIe link either
  EXPECT_EQ(chooseNic(t, DevRef::numa(0), 0), 1);
  // No port speeds (a file the library did not write): PCIe links decide what compares.
  t.nics[0].speedMbps = 0;
  t.nics[0].pciLinkGBs = 31.5;  // x16 PCIe 4.0
  t.nics[1].pciLinkGBs = 2.0;   // x4 PCIe 2.0: a 1 GbE management port's slot
  EXPECT_EQ(chooseNic(t, DevRef::numa(0), 0), 0);
  t.nics[1].pciLinkGBs = 15.75;  // x8 PCIe 4.0
  EXPECT_EQ(chooseNic(t, DevRef::numa(0), 0), 1);
}

TEST(TopoPaths, NicCapacity) {
  NicInfo n;
  EXPECT_EQ(nicCapacityMbps(n), 0u);
  n.speedMbps = 200000;
  EXPECT_EQ(nicCapacityMbps(n), 200000u);
  n.pciLinkGBs = 15.753846;  // a 200 Gb/s port in an x16 PCIe 3.0 slot moves 126 Gb/s
  EXPECT_EQ(nicCapacityMbps(n), 126030u);
  n.speedMbps = 0;
  EXPECT_EQ(nicCapacityMbps(n), 126030u);
  n.pciLinkGBs = 31.507692;
  n.speedMbps = 100000;
  EXPECT_EQ(nicCapacityMbps(n), 100000u);
}

TEST(TopoPaths, UnknownLocality) {
  HostTopo none;  // no hwloc: nothing known
  EXPECT_EQ(classify(none, DevRef::host(), DevRef::host()), PathClass::CrossSocket);
  EXPECT_EQ(localityOfCpus(none, {0}).numa, -1);
  HostTopo one = handBuilt();
  one.packages.resize(1);
  one.numas.resize(1);
  one.numas[0].cpus = {0, 1, 2, 3};
  EXPECT_EQ(classify(one, DevRef::host(), DevRef::host()), PathClass::Numa);
  // A memory-only node (HBM, GPU memory, CXL) beside it does not make two.
  NumaInfo hbm;
  hbm.osIndex = 1;
  hbm.package = 0;
  hbm.kind = "HBM";
  one.numas.push_back(hbm);
  EXPECT_EQ(cpuNumaCount(one), 1);
  EXPECT_EQ(classify(one, DevRef::host(), DevRef::host()), PathClass::Numa);
  EXPECT_EQ(localityOfCpus(one, {2}).numa, 0);
}

// A GPU NVLinked to its CPU (POWER9): its copies to and from that package's memory use
// NVLink; the other socket's memory is still across the sockets.
TEST(TopoPaths, GpuNvlinkToItsCpu) {
  HostTopo t = handBuilt();
  t.gpus[3].hostNvlinkGBs = 75;
  t.gpus[3].hostNvlinkPackage = 0;
  EXPECT_EQ(classify(t, DevRef::gpu(3), DevRef::numa(0)), PathClass::NVLink);
  EXPECT_EQ(classify(t, DevRef::numa(1), DevRef::gpu(3)), PathClass::NVLink);
  EXPECT_EQ(classify(t, DevRef::package(0), DevRef::gpu(3)), PathClass::NVLink);
  EXPECT_EQ(classify(t, DevRef::gpu(3), DevRef::numa(2)), PathClass::CrossSocket);
  EXPECT_EQ(classify(t, DevRef::gpu(3), DevRef::nic(1)), PathClass::Package) << "NICs stay on PCIe";
  EXPECT_EQ(classify(t, DevRef::gpu(2), DevRef::numa(0)), PathClass::Numa);
}

TEST(TopoPaths, ClassNames) {
  for (int i = 0; i < kNumPathClasses; ++i) {
    PathClass c;
    ASSERT_TRUE(parsePathClass(pathClassName(static_cast<PathClass>(i)), &c));
    EXPECT_EQ(static_cast<int>(c), i);
  }
  PathClass c;
  EXPECT_FALSE(parsePathClass("pix", &c));
  EXPECT_STREQ(pathClassName(PathClass::CrossSocket), "cross-socket");
  const char* kinds[kNumNicKinds] = {"ib", "roce", "ethernet", "opa", "efa", "slingshot"};
  for (int k = 0; k < kNumNicKinds; ++k) {
    EXPECT_STREQ(nicKindName(static_cast<NicKind>(k)), kinds[k]);
    EXPECT_EQ(isFabric(static_cast<NicKind>(k)), k != static_cast<int>(NicKind::Eth)) << kinds[k];
  }
}

TEST(TopoPaths, LinkTableDefaultsAndOverrides) {
  LinkTable d = LinkTable::defaults();
  // Inside a host, a farther class never gets more bandwidth or less latency (self and
  // NVLink aside: their ranks differ by device kind); the network is the slowest to start.
  for (int i = 2; i + 1 < kNumPathClasses - 1; ++i) {
    EXPECT_LE(d.byClass[i + 1].bwGBs, d.byClass[i].bwGBs) << pathClassName(static_cast<PathClass>(i));
    EXPECT_GE(d.byClass[i + 1].latUs, d.byClass[i].latUs) << pathClassName(static_cast<PathClass>(i));
  }
  for (int i = 0; i < kNumPathClasses - 1; ++i) EXPECT_GT(d.of(PathClass::Network).latUs, d.byClass[i].latUs);
  EXPECT_DOUBLE_EQ(d.of(PathClass::Network).bwGBs, 12.0);
  EXPECT_LT(d.ethernet.bwGBs, d.of(PathClass::Network).bwGBs);
  EXPECT_GT(d.ethernet.latUs, d.of(PathClass::Network).latUs);

  LinkTable t = LinkTable::fromConfig(Config::fromEnv(
      {{"COLL_TOPO_LINK_BW", "nvlink=40,network=25.5,ethernet=3"}, {"COLL_TOPO_LINK_LAT", "cross-socket=2.5"}}));
  EXPECT_DOUBLE_EQ(t.of(PathClass::NVLink).bwGBs, 40);
  EXPECT_DOUBLE_EQ(t.of(PathClass::Network).bwGBs, 25.5);
  EXPECT_DOUBLE_EQ(t.ethernet.bwGBs, 3);
  EXPECT_DOUBLE_EQ(t.of(PathClass::CrossSocket).latUs, 2.5);
  EXPECT_DOUBLE_EQ(t.of(PathClass::Numa).bwGBs, d.of(PathClass::Numa).bwGBs);
  EXPECT_TRUE(t.userBw[static_cast<int>(PathClass::Network)]);
  EXPECT_TRUE(t.userBw[kNumPathClasses]);
  EXPECT_FALSE(t.userBw[static_cast<int>(PathClass::Numa)]);
  EXPECT_TRUE(t.userLat[static_cast<int>(PathClass::CrossSocket)]);

  LinkTable x;
  expectError([&] { x.applyOverrides("pix=3", true, "COLL_TOPO_LINK_BW"); }, collInvalidArgument,
              {"COLL_TOPO_LINK_BW", "unknown path class 'pix'"});
  expectError([&] { x.applyOverrides("network=-1", true, "V"); }, collInvalidArgument, {"network='-1'"});
  expectError([&] { x.applyOverrides("network=1e9x", true, "V"); }, collInvalidArgument, {"1e9x"});
  // Values the cost model cannot use: its estimates would be infinite or zero.
  expectError([&] { x.applyOverrides("network=1e308", false, "V"); }, collInvalidArgument,
              {"network='1e308' is outside", "us"});
  expectError([&] { x.applyOverrides("ethernet=1e-300", true, "V"); }, collInvalidArgument,
              {"ethernet='1e-300' is outside", "GB/s"});
  expectError([&] { x.applyOverrides("network", false, "V"); }, collInvalidArgument, {"not class=value"});
}

TEST(TopoPaths, TextHelpers) {
  EXPECT_EQ(cpuListString({}), "");
  EXPECT_EQ(cpuListString({3}), "3");
  EXPECT_EQ(cpuListString({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(parseIbRateMbps("200 Gb/sec (4X HDR)"), 200000u);
  EXPECT_EQ(parseIbRateMbps("2.5 Gb/sec (1X SDR)"), 2500u);
  EXPECT_EQ(parseIbRateMbps("100 Mb/sec"), 100u);
  EXPECT_EQ(parseIbRateMbps(""), 0u);
  EXPECT_EQ(parseIbRateMbps("fast"), 0u);
  HostTopo t = handBuilt();
  std::string text = describeHost(t);
  EXPECT_NE(text.find("2 packages, 3 NUMA nodes"), std::string::npos) << text;
  EXPECT_NE(text.find("nic 1 mlx5_0 (roce)"), std::string::npos) << text;
  std::string paths = describePaths(t);
  EXPECT_NE(paths.find("pci-switch"), std::string::npos) << paths;
}

}  // namespace
}  // namespace coll
