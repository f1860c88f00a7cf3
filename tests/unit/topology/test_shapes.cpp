// Hosts shaped like production clusters whose files the library did not write (no NIC
// speeds), from tests/data/topo (topo_clusters.py): NVLink without NVSwitch on POWER9, CPU
// nodes with a 1 GbE management port beside an InfiniBand / Omni-Path / Slingshot / EFA
// fabric, HBM in flat mode (Xeon Max, KNL), memory-only NUMA nodes (GPU memory, HBM, CXL),
// and an hwloc XML v3 file. Each host: path classes, the NIC of GPU ranks and of CPU ranks
// on every NUMA node, NUMA placement and labels.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "coll_config.h"
#include "base/config.hpp"
#include "topology/topology.hpp"
#include "topo_test_util.hpp"

namespace coll {
namespace {

using test::dataFile;
using test::editedCopy;
using test::expectError;
using test::TempDir;

#if COLL_HAVE_HWLOC

int numaByOs(const HostTopo& t, int os) {
  for (size_t i = 0; i < t.numas.size(); ++i)
    if (t.numas[i].osIndex == os) return static_cast<int>(i);
  ADD_FAILURE() << "no NUMA node with OS index " << os;
  return 0;
}

int nicByName(const HostTopo& t, const std::string& name) {
  for (size_t i = 0; i < t.nics.size(); ++i)
    if (t.nics[i].name == name) return static_cast<int>(i);
  ADD_FAILURE() << "no NIC " << name;
  return 0;
}

// A copy of tests/data/topo/`name` whose OS device `osdev` (a leaf) has the `infos`
// elements a live machine's dump adds.
std::string withInfos(const TempDir& dir, const std::string& name, const std::string& osdev, const std::string& infos) {
  std::stringstream text;
  text << std::ifstream(dataFile(name)).rdbuf();
  std::string s = text.str();
  const size_t at = s.find("name=\"" + osdev + "\"");
  const size_t end = at == std::string::npos ? at : s.find("/>", at);
  EXPECT_NE(end, std::string::npos) << osdev;
  if (end != std::string::npos) s.replace(end, 2, ">" + infos + "</object>");
  std::string path = dir.path() + "/infos-" + name;
  std::ofstream(path) << s;
  return path;
}

// The NIC a CPU rank on each NUMA node with CPUs uses, for every local rank 0..3 (which
// only spread ranks over equal NICs).
void expectCpuRanksUse(const HostTopo& t, const std::string& nic) {
  const int want = nicByName(t, nic);
  for (size_t i = 0; i < t.numas.size(); ++i) {
    if (t.numas[i].memoryOnly()) continue;
    for (int local = 0; local < 4; ++local)
      EXPECT_EQ(chooseNic(t, DevRef::numa(static_cast<int>(i)), local), want) << "numa " << i << " local " << local;
  }
  // A rank allowed on every CPU (locality unknown) too.
  EXPECT_EQ(chooseNic(t, DevRef::host(), 0), want);
}

// POWER9 AC922: NVLink between the two GPUs of each socket and from each GPU to its CPU,
// with no NVSwitch. hwloc's merge and transitive-closure transforms set every GPU pair of
// this matrix to zero, which showed them as cross-socket/numa.
TEST(TopoShapes, Power9NvlinkWithoutNvswitch) {
  HostTopo t = loadXml(dataFile("power9_v100_nvlink.xml"));
  ASSERT_EQ(t.gpus.size(), 4u);
  ASSERT_EQ(t.nvlinkGBs.size(), 4u);
  auto gg = [&](int a, int b) { return classify(t, DevRef::gpu(a), DevRef::gpu(b)); };
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      const bool pair = a != b && a / 2 == b / 2;
      EXPECT_DOUBLE_EQ(t.nvlinkGBs[a][b], pair ? 75.0 : 0.0) << a << "-" << b;
      EXPECT_EQ(gg(a, b), a == b ? PathClass::Self : pair ? PathClass::NVLink : PathClass::CrossSocket) << a << "-" << b;
    }
  const int ddr[2] = {numaByOs(t, 0), numaByOs(t, 8)};
  for (int g = 0; g < 4; ++g) {
    const int socket = g / 2;
    EXPECT_DOUBLE_EQ(t.gpus[g].hostNvlinkGBs, 75.0) << g;
    EXPECT_EQ(t.gpus[g].hostNvlinkPackage, socket) << g;
    // The package also holds two GPU memory nodes: the GPU is still local to the DDR one.
    EXPECT_EQ(t.gpus[g].loc.numa, ddr[socket]) << g;
    EXPECT_EQ(t.gpus[g].loc.package, socket) << g;
    // Host staging goes over NVLink to the GPU's own socket's memory.
    EXPECT_EQ(classify(t, DevRef::gpu(g), DevRef::numa(ddr[socket])), PathClass::NVLink) << g;
    EXPECT_EQ(classify(t, DevRef::gpu(g), DevRef::numa(ddr[1 - socket])), PathClass::CrossSocket) << g;
    // GPU ranks: the HCA of their socket, never the management port beside it.
    const int hca = nicByName(t, "mlx5_" + std::to_string(socket));
    EXPECT_EQ(t.gpus[g].closestNic, hca) << g;
    EXPECT_EQ(classify(t, DevRef::gpu(g), DevRef::nic(hca)), PathClass::Numa) << g;
    for (int local = 0; local < 4; ++local) EXPECT_EQ(chooseNic(t, DevRef::gpu(g), local), hca) << g;
  }
  for (int s = 0; s < 2; ++s)
    for (int local = 0; local < 2; ++local)
      EXPECT_EQ(chooseNic(t, DevRef::numa(ddr[s]), local), nicByName(t, "mlx5_" + std::to_string(s))) << s;
  const NicInfo& mgmt = t.nics[nicByName(t, "enP5p1s0f0")];
  EXPECT_EQ(mgmt.kind, NicKind::Eth);
  EXPECT_EQ(mgmt.loc.numa, ddr[0]);
  EXPECT_EQ(t.nics[nicByName(t, "mlx5_1")].kind, NicKind::Ib);
}

// The GPU memory of POWER9 as NUMA nodes: memory only, placed in the package they hang
// off, named by their GPU; they never hold a rank.
TEST(TopoShapes, Power9GpuMemoryNodes) {
  HostTopo t = loadXml(dataFile("power9_v100_nvlink.xml"));
  ASSERT_EQ(t.numas.size(), 6u);
  EXPECT_EQ(cpuNumaCount(t), 2);
  EXPECT_EQ(cpuListString(t.numas[numaByOs(t, 0)].cpus), "0-31");
  EXPECT_EQ(cpuListString(t.numas[numaByOs(t, 8)].cpus), "32-63");
  EXPECT_EQ(t.numas[numaByOs(t, 8)].package, 1);
  for (int k = 0; k < 4; ++k) {
    const NumaInfo& n = t.numas[numaByOs(t, 252 + k)];
    EXPECT_TRUE(n.memoryOnly()) << k;
    EXPECT_EQ(n.package, k / 2) << k;
    EXPECT_EQ(n.kind, "GPUMemory") << k;
    EXPECT_EQ(n.gpuBusId, t.gpus[k].busId) << k;
    EXPECT_EQ(n.memBytes, 16ull << 30) << k;
  }
  EXPECT_EQ(localityOfCpus(t, {0, 1, 2, 3}).numa, numaByOs(t, 0));
  EXPECT_EQ(localityOfCpus(t, {40}).numa, numaByOs(t, 8));
  const std::string text = describeHost(t);
  EXPECT_NE(text.find("numa 1 (os 252, package 0): memory only, GPUMemory of gpu 0 (0004:03:00.0), 16 GiB"),
            std::string::npos) << text;
  EXPECT_NE(text.find("numa 3 (os 8, package 1): cpus 32-63, 256 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("closest nic mlx5_1, nvlink to package 1 75 GB/s"), std::string::npos) << text;
}

// EPYC in NPS2 with the management port on NUMA node 0 and the HDR HCA on node 1, and a
// CXL memory expander hanging off the whole machine. The port next to a rank used to win
// because locality came first and no speed was known.
TEST(TopoShapes, EpycManagementPortBesideInfiniBand) {
  HostTopo t = loadXml(dataFile("epyc_ib_mgmt.xml"));
  ASSERT_EQ(t.numas.size(), 5u);
  ASSERT_EQ(t.nics.size(), 2u);
  const NicInfo& mgmt = t.nics[nicByName(t, "eno1")];
  const NicInfo& hca = t.nics[nicByName(t, "mlx5_0")];
  EXPECT_EQ(mgmt.kind, NicKind::Eth);
  EXPECT_EQ(hca.kind, NicKind::Ib);
  EXPECT_EQ(hca.netdev, "ib0");
  EXPECT_EQ(mgmt.speedMbps, 0u);
  EXPECT_EQ(hca.speedMbps, 0u);
  EXPECT_EQ(nicCapacityMbps(mgmt), 16000u) << "x4 PCIe 2.0";
  EXPECT_EQ(nicCapacityMbps(hca), 252061u) << "x16 PCIe 4.0";
  // The CXL node's nodeset bit is in every object's nodeset: devices used to lose their node.
  EXPECT_EQ(mgmt.loc.numa, numaByOs(t, 0));
  EXPECT_EQ(hca.loc.numa, numaByOs(t, 1));
  EXPECT_EQ(classify(t, DevRef::numa(numaByOs(t, 0)), DevRef::nic(nicByName(t, "eno1"))), PathClass::Numa);
  EXPECT_EQ(classify(t, DevRef::numa(numaByOs(t, 0)), DevRef::nic(nicByName(t, "mlx5_0"))), PathClass::Package);
  expectCpuRanksUse(t, "mlx5_0");

  const NumaInfo& cxl = t.numas[numaByOs(t, 4)];
  EXPECT_TRUE(cxl.memoryOnly());
  EXPECT_EQ(cxl.kind, "CXL-DRAM");
  EXPECT_EQ(cxl.package, 1) << "nearest to socket 1's nodes in the NUMALatency matrix";
  for (int os = 0; os < 4; ++os) {
    const NumaInfo& n = t.numas[numaByOs(t, os)];
    EXPECT_FALSE(n.memoryOnly()) << os;
    EXPECT_EQ(n.package, os / 2) << os;
    EXPECT_EQ(n.cpus.size(), 8u) << os;
  }
  EXPECT_EQ(localityOfCpus(t, {0}).numa, numaByOs(t, 0)) << "not the CXL node, which spans every CPU";
  Locality l = localityOfCpus(t, t.packages[1].cpus);
  EXPECT_EQ(l.numa, -1);
  EXPECT_EQ(l.package, 1);

  // Without the distances, the expander belongs to no package.
  TempDir dir;
  std::string path = editedCopy(dir, "epyc_ib_mgmt.xml", "name=\"NUMALatency\"", "name=\"SomethingElse\"");
  HostTopo far = loadXml(path);
  EXPECT_EQ(far.numas[numaByOs(far, 4)].package, -1);
  EXPECT_NE(describeHost(far).find("(os 4, machine): memory only, CXL-DRAM, 256 GiB"), std::string::npos)
      << describeHost(far);
}

// Xeon with the Omni-Path HFI on socket 1: labelled opa, also where a live machine
// recorded the InfiniBand link layer the hfi1 driver reports.
TEST(TopoShapes, XeonOmniPath) {
  HostTopo t = loadXml(dataFile("xeon_opa_mgmt.xml"));
  const NicInfo& hfi = t.nics[nicByName(t, "hfi1_0")];
  EXPECT_EQ(hfi.kind, NicKind::Opa);
  EXPECT_EQ(hfi.netdev, "ib0");
  EXPECT_EQ(hfi.loc.numa, 1);
  expectCpuRanksUse(t, "hfi1_0");
  TempDir dir;
  HostTopo live = loadXml(withInfos(dir, "xeon_opa_mgmt.xml", "hfi1_0",
                                    "<info name=\"LinkLayer\" value=\"InfiniBand\"/>"
                                    "<info name=\"LinkSpeedMbps\" value=\"100000\"/>"));
  EXPECT_EQ(live.nics[nicByName(live, "hfi1_0")].kind, NicKind::Opa);
  EXPECT_EQ(live.nics[nicByName(live, "hfi1_0")].speedMbps, 100000u);
  EXPECT_NE(describeHost(t).find("nic 1 hfi1_0 (opa, ib0) 0000:21:00.0 numa 1, speed unknown"), std::string::npos)
      << describeHost(t);
}

// HPE Cray Cassini: one NIC (cxi0, interface hsn0), though hwloc lists two network OS
// devices for it, and PCI class 0200 says Ethernet.
TEST(TopoShapes, EpycSlingshot) {
  HostTopo t = loadXml(dataFile("epyc_slingshot_mgmt.xml"));
  ASSERT_EQ(t.nics.size(), 2u);
  const NicInfo& hsn = t.nics[nicByName(t, "cxi0")];
  EXPECT_EQ(hsn.kind, NicKind::Slingshot);
  EXPECT_EQ(hsn.netdev, "hsn0");
  EXPECT_EQ(hsn.loc.numa, 1);
  expectCpuRanksUse(t, "cxi0");
}

// AWS: the ENA interface on socket 0, the EFA device on socket 1, in a VM where hwloc
// knows no PCIe link speed either: RDMA capability alone decides.
TEST(TopoShapes, XeonEfa) {
  HostTopo t = loadXml(dataFile("xeon_efa.xml"));
  ASSERT_EQ(t.nics.size(), 2u);
  const NicInfo& efa = t.nics[nicByName(t, "efa_0")];
  EXPECT_EQ(efa.kind, NicKind::Efa);
  EXPECT_EQ(efa.netdev, "");
  EXPECT_EQ(nicCapacityMbps(efa), 0u);
  EXPECT_EQ(t.nics[nicByName(t, "ens5")].kind, NicKind::Eth);
  expectCpuRanksUse(t, "efa_0");
}

// Xeon Max in flat mode (no subtypes, as hwloc before 2.8 writes it): the package holds a
// DDR and an HBM node, and the devices hanging off it are local to the DDR one.
TEST(TopoShapes, XeonMaxFlatHbm) {
  HostTopo t = loadXml(dataFile("xeon_max_flat.xml"));
  ASSERT_EQ(t.numas.size(), 4u);
  EXPECT_EQ(cpuNumaCount(t), 2);
  for (int p = 0; p < 2; ++p) {
    const NumaInfo& ddr = t.numas[numaByOs(t, p)];
    const NumaInfo& hbm = t.numas[numaByOs(t, 2 + p)];
    EXPECT_EQ(ddr.cpus, t.packages[p].cpus) << p;
    EXPECT_TRUE(hbm.memoryOnly()) << p;
    EXPECT_EQ(hbm.package, p) << p;
    EXPECT_EQ(hbm.memBytes, 64ull << 30) << p;
  }
  EXPECT_EQ(t.nics[nicByName(t, "eno1")].loc.numa, numaByOs(t, 0));
  EXPECT_EQ(t.nics[nicByName(t, "mlx5_0")].loc.numa, numaByOs(t, 1));
  EXPECT_EQ(classify(t, DevRef::numa(numaByOs(t, 1)), DevRef::nic(nicByName(t, "mlx5_0"))), PathClass::Numa);
  EXPECT_EQ(localityOfCpus(t, t.packages[0].cpus).numa, numaByOs(t, 0));
  expectCpuRanksUse(t, "mlx5_0");
  EXPECT_NE(describeHost(t).find("(os 2, package 0): memory only, 64 GiB"), std::string::npos) << describeHost(t);
}

// KNL in quadrant flat mode: DDR and MCDRAM hang off the one package, hwloc names them.
TEST(TopoShapes, KnlFlatMcdram) {
  HostTopo t = loadXml(dataFile("knl_flat_opa.xml"));
  ASSERT_EQ(t.numas.size(), 2u);
  EXPECT_EQ(t.numas[0].kind, "DRAM");
  EXPECT_EQ(cpuListString(t.numas[0].cpus), "0-63");
  EXPECT_EQ(t.numas[1].kind, "MCDRAM");
  EXPECT_TRUE(t.numas[1].memoryOnly());
  EXPECT_EQ(t.numas[1].package, 0);
  EXPECT_EQ(cpuNumaCount(t), 1);
  for (const NicInfo& n : t.nics) EXPECT_EQ(n.loc.numa, 0) << n.name;
  EXPECT_EQ(t.nics[nicByName(t, "hfi1_0")].kind, NicKind::Opa);
  EXPECT_EQ(classify(t, DevRef::host(), DevRef::nic(0)), PathClass::Numa) << "one NUMA node with CPUs";
  expectCpuRanksUse(t, "hfi1_0");
  EXPECT_NE(describeHost(t).find("numa 1 (os 1, package 0): memory only, MCDRAM, 16 GiB"), std::string::npos)
      << describeHost(t);
}

// The 8-GPU server with its NIC speeds taken away (a file the library did not write):
// each GPU still uses the HCA on its switch, CPU ranks an HCA on their socket.
TEST(TopoShapes, GpuServerWithoutNicSpeeds) {
  HostTopo t = loadXml(dataFile("gpu8_ib4.xml"));
  for (NicInfo& n : t.nics) n.speedMbps = 0;
  const int closest[] = {1, 1, 2, 2, 3, 3, 4, 4};
  for (int g = 0; g < 8; ++g) EXPECT_EQ(chooseNic(t, DevRef::gpu(g), g), closest[g]) << g;
  EXPECT_EQ(chooseNic(t, DevRef::numa(0), 0), 1);
  EXPECT_EQ(chooseNic(t, DevRef::numa(0), 1), 2);
  EXPECT_EQ(chooseNic(t, DevRef::numa(1), 0), 3);
}

// hwloc 3.x writes XML v3 by default, which hwloc 2.x refuses: the message says so and
// how to export version 2.
TEST(TopoShapes, XmlVersion3) {
  const std::string path = dataFile("epyc_ib_mgmt_v3.xml");
  expectError([&] { loadXml(path); }, collInvalidArgument,
              {path.c_str(), "hwloc XML version 3 file", "lstopo --of v2xml", "hwloc 2.x's 'lstopo FILE.xml'"});
  expectError([&] { discoverLocal(Config::fromEnv({{"COLL_TOPO_FILE", path}})); }, collInvalidArgument,
              {"COLL_TOPO_FILE", "version 3"});
  // A damaged v2 file keeps the generic message.
  TempDir dir;
  std::string broken = editedCopy(dir, "epyc_ib_mgmt.xml", "<object type=\"Package\"", "<object type=\"Pkg\"");
  expectError([&] { loadXml(broken); }, collInvalidArgument, {"is not an hwloc XML topology"});
}

#endif

}  // namespace
}  // namespace coll
