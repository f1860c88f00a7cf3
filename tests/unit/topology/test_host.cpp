// Host discovery from hwloc XML files of real server layouts (tests/data/topo, written by
// gen_topo.py, plus an export of the build machine) and from this machine.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "coll_config.h"
#include "base/config.hpp"
#include "topology/exchange.hpp"
#include "topology/topology.hpp"
#include "topo_test_util.hpp"

namespace coll {
namespace {

using test::dataFile;
using test::editedCopy;
using test::EnvGuard;
using test::expectError;
using test::TempDir;

#if COLL_HAVE_HWLOC

const HostTopo& gpuServer() {
  static const HostTopo t = loadXml(dataFile("gpu8_ib4.xml"));
  return t;
}
const HostTopo& epycServer() {
  static const HostTopo t = loadXml(dataFile("epyc_nps2_eth.xml"));
  return t;
}

TEST(TopoXml, GpuServerCpuSide) {
  const HostTopo& t = gpuServer();
  EXPECT_TRUE(t.detailed);
  EXPECT_EQ(t.hostname, "gpu-node-01");
  ASSERT_EQ(t.packages.size(), 2u);
  ASSERT_EQ(t.numas.size(), 2u);
  EXPECT_EQ(t.cores, 32);
  EXPECT_EQ(t.pus, 64);
  EXPECT_EQ(t.packages[1].cores, 16);
  EXPECT_EQ(cpuListString(t.numas[0].cpus), "0-15,32-47");
  EXPECT_EQ(cpuListString(t.numas[1].cpus), "16-31,48-63");
  EXPECT_EQ(t.numas[1].package, 1);
  EXPECT_EQ(t.numas[0].memBytes, 256ull << 30);
  ASSERT_EQ(t.caches.size(), 3u);
  EXPECT_EQ(t.caches[0].level, 1);
  EXPECT_EQ(t.caches[0].type, "data");
  EXPECT_EQ(t.caches[0].bytes, 48u * 1024);
  EXPECT_EQ(t.caches[0].count, 32);
  EXPECT_EQ(t.caches[2].level, 3);
  EXPECT_EQ(t.caches[2].bytes, 36u << 20);
  EXPECT_EQ(t.caches[2].count, 2);
}

TEST(TopoXml, GpuServerDevices) {
  const HostTopo& t = gpuServer();
  ASSERT_EQ(t.gpus.size(), 8u);
  const char* bus[] = {"0000:19:00.0", "0000:1a:00.0", "0000:1e:00.0", "0000:1f:00.0",
                       "0000:83:00.0", "0000:84:00.0", "0000:a3:00.0", "0000:a4:00.0"};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(t.gpus[i].busId, bus[i]);
    EXPECT_EQ(t.gpus[i].name, "cuda" + std::to_string(i));
    EXPECT_EQ(t.gpus[i].loc.numa, i / 4) << "gpu " << i;
    EXPECT_EQ(t.gpus[i].loc.package, i / 4) << "gpu " << i;
  }
  EXPECT_EQ(t.gpus[0].model, "NVIDIA A100 80GB PCIe");
  // Host bridge, root port, switch upstream port, switch downstream port.
  ASSERT_EQ(t.gpus[0].pciPath.size(), 4u);
  EXPECT_TRUE(t.gpus[0].pciPath[0].hostBridge);
  EXPECT_EQ(t.gpus[0].pciPath[0].label, "hostbridge 0000:[16-20]");
  EXPECT_EQ(t.gpus[0].pciPath[2].label, "0000:17:00.0");
  EXPECT_NEAR(t.gpus[0].pciLinkGBs, 31.5, 0.1);

  ASSERT_EQ(t.nics.size(), 5u);
  EXPECT_EQ(t.nics[0].name, "eno1");
  EXPECT_EQ(t.nics[0].kind, NicKind::Eth);
  EXPECT_EQ(t.nics[0].speedMbps, 0u);
  for (int i = 0; i < 4; ++i) {
    const NicInfo& n = t.nics[i + 1];
    EXPECT_EQ(n.name, "mlx5_" + std::to_string(i));
    EXPECT_EQ(n.kind, NicKind::Ib);
    EXPECT_EQ(n.speedMbps, 200000u);
    EXPECT_EQ(n.loc.numa, i / 2);
  }
  EXPECT_EQ(t.nics[1].netdev, "ibp27s0");
  EXPECT_EQ(t.nics[1].busId, "0000:1b:00.0");
  ASSERT_EQ(t.nvlinkGBs.size(), 8u);
  EXPECT_DOUBLE_EQ(t.nvlinkGBs[0][1], 300.0);
  EXPECT_DOUBLE_EQ(t.nvlinkGBs[0][2], 0.0);
  // Each GPU pair shares a switch with one HCA.
  const int closest[] = {1, 1, 2, 2, 3, 3, 4, 4};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t.gpus[i].closestNic, closest[i]) << "gpu " << i;
}

TEST(TopoXml, GpuServerPathClasses) {
  const HostTopo& t = gpuServer();
  auto gg = [&](int a, int b) { return classify(t, DevRef::gpu(a), DevRef::gpu(b)); };
  auto gn = [&](int g, int n) { return classify(t, DevRef::gpu(g), DevRef::nic(n)); };
  EXPECT_EQ(gg(3, 3), PathClass::Self);
  EXPECT_EQ(gg(0, 1), PathClass::NVLink);
  EXPECT_EQ(gg(7, 6), PathClass::NVLink);
  EXPECT_EQ(gg(0, 2), PathClass::HostBridge);   // two root ports of host bridge 16
  EXPECT_EQ(gg(1, 3), PathClass::HostBridge);
  EXPECT_EQ(gg(4, 6), PathClass::Numa);         // host bridges 80 and a0, same socket
  EXPECT_EQ(gg(5, 7), PathClass::Numa);
  EXPECT_EQ(gg(0, 4), PathClass::CrossSocket);
  EXPECT_EQ(gg(3, 7), PathClass::CrossSocket);
  EXPECT_EQ(gn(0, 1), PathClass::PciSwitch);    // GPU0 and mlx5_0 below switch S0
  EXPECT_EQ(gn(0, 2), PathClass::HostBridge);
  EXPECT_EQ(gn(0, 0), PathClass::Numa);         // eno1 on the chipset's host bridge
  EXPECT_EQ(gn(0, 3), PathClass::CrossSocket);
  EXPECT_EQ(gn(6, 4), PathClass::PciSwitch);
  EXPECT_EQ(gn(4, 4), PathClass::Numa);
  EXPECT_EQ(classify(t, DevRef::nic(1), DevRef::nic(2)), PathClass::HostBridge);
  EXPECT_EQ(classify(t, DevRef::numa(1), DevRef::nic(3)), PathClass::Numa);
  EXPECT_EQ(classify(t, DevRef::numa(0), DevRef::nic(4)), PathClass::CrossSocket);
  // Unknown CPU locality on a two-socket host is assumed to cross sockets.
  EXPECT_EQ(classify(t, DevRef::host(), DevRef::nic(1)), PathClass::CrossSocket);

  // Without the NVLink matrix, GPUs 0 and 1 are still neighbours below one switch.
  HostTopo noNvlink = t;
  noNvlink.nvlinkGBs.clear();
  EXPECT_EQ(classify(noNvlink, DevRef::gpu(0), DevRef::gpu(1)), PathClass::PciSwitch);
}

TEST(TopoXml, GpuServerNicChoiceAndCpus) {
  const HostTopo& t = gpuServer();
  // From NUMA node 0, mlx5_0 and mlx5_1 are equally close and faster than eno1.
  EXPECT_EQ(chooseNic(t, DevRef::numa(0), 0), 1);
  EXPECT_EQ(chooseNic(t, DevRef::numa(0), 1), 2);
  EXPECT_EQ(chooseNic(t, DevRef::numa(0), 2), 1);
  EXPECT_EQ(chooseNic(t, DevRef::numa(1), 1), 4);
  EXPECT_EQ(chooseNic(t, DevRef::gpu(5), 1), 3);  // one closest: the tie-break is moot
  Locality l = localityOfCpus(t, {0, 32});
  EXPECT_EQ(l.numa, 0);
  EXPECT_EQ(l.package, 0);
  EXPECT_EQ(localityOfCpus(t, {17}).numa, 1);
  l = localityOfCpus(t, {0, 16});
  EXPECT_EQ(l.numa, -1);
  EXPECT_EQ(l.package, -1);
  EXPECT_EQ(localityOfCpus(t, {}).numa, -1);
}

// HGX H100: 8 SXM GPUs joined through four NVSwitches (hwloc lists the switches' ports in
// the NVLink matrix; merged and closed, every GPU pair is NVLink at the GPU's 18 links),
// and ConnectX-7 ports in Ethernet mode, which are RoCE.
TEST(TopoXml, HgxNvswitchRoce) {
  HostTopo t = loadXml(dataFile("hgx_h100_roce.xml"));
  EXPECT_EQ(t.hostname, "h100-node-03");
  ASSERT_EQ(t.gpus.size(), 8u) << "the NVSwitches (class 0680) are not GPUs";
  ASSERT_EQ(t.nics.size(), 4u) << "nor NICs";
  ASSERT_EQ(t.nvlinkGBs.size(), 8u);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      EXPECT_DOUBLE_EQ(t.nvlinkGBs[a][b], a == b ? 0.0 : 450.0) << a << "-" << b;
      EXPECT_EQ(classify(t, DevRef::gpu(a), DevRef::gpu(b)), a == b ? PathClass::Self : PathClass::NVLink);
    }
  for (int i = 0; i < 4; ++i) {
    const NicInfo& n = t.nics[i];
    EXPECT_EQ(n.name, "mlx5_" + std::to_string(i));
    EXPECT_EQ(n.kind, NicKind::Roce) << "class 0200 with a verbs device, link layer Ethernet";
    EXPECT_EQ(n.speedMbps, 400000u);
    EXPECT_EQ(n.loc.numa, i / 2);
  }
  EXPECT_EQ(t.nics[2].netdev, "enp149s0np0");
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(t.gpus[g].closestNic, g / 2) << "gpu " << g;
    EXPECT_EQ(classify(t, DevRef::gpu(g), DevRef::nic(g / 2)), PathClass::PciSwitch);
  }
  EXPECT_EQ(classify(t, DevRef::gpu(0), DevRef::nic(1)), PathClass::Numa);
  EXPECT_EQ(classify(t, DevRef::gpu(0), DevRef::nic(2)), PathClass::CrossSocket);
}

// The same machine before the NVIDIA driver is loaded: no CUDA or NVML devices, so the
// GPUs are known by their PCI class (0302, vendor 10de) alone and meet over PCIe.
TEST(TopoXml, GpusWithoutTheirDriver) {
  HostTopo t = loadXml(dataFile("hgx_h100_nodriver.xml"));
  ASSERT_EQ(t.gpus.size(), 8u);
  EXPECT_EQ(t.gpus[3].busId, "0000:54:00.0");
  EXPECT_EQ(t.gpus[3].name, "");
  EXPECT_EQ(t.gpus[3].model, "GH100 [H100 SXM5 80GB]");
  EXPECT_TRUE(t.nvlinkGBs.empty() || t.nvlinkGBs[0][1] == 0.0);
  EXPECT_EQ(classify(t, DevRef::gpu(0), DevRef::gpu(1)), PathClass::PciSwitch);
  EXPECT_EQ(classify(t, DevRef::gpu(0), DevRef::gpu(2)), PathClass::Numa);
  EXPECT_EQ(classify(t, DevRef::gpu(0), DevRef::gpu(7)), PathClass::CrossSocket);
  EXPECT_EQ(t.gpus[5].closestNic, 2);
  // Bus ids still find a rank's device (cudaDeviceGetPCIBusId's form).
  EXPECT_EQ(findGpuByBusId(t, "0000:D4:00.0"), 7);
}

TEST(TopoXml, EpycServer) {
  const HostTopo& t = epycServer();
  ASSERT_EQ(t.packages.size(), 2u);
  ASSERT_EQ(t.numas.size(), 4u);
  EXPECT_EQ(t.cores, 32);
  EXPECT_EQ(t.pus, 64);
  const char* cpus[] = {"0-7,32-39", "8-15,40-47", "16-23,48-55", "24-31,56-63"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(cpuListString(t.numas[i].cpus), cpus[i]);
    EXPECT_EQ(t.numas[i].package, i / 2);
    EXPECT_EQ(t.numas[i].osIndex, i);
  }
  ASSERT_EQ(t.caches.size(), 3u);
  EXPECT_EQ(t.caches[2].count, 8);
  EXPECT_TRUE(t.gpus.empty()) << "the BMC's ASPEED VGA is not a GPU";
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].name, "ens6f0");
  EXPECT_EQ(t.nics[0].kind, NicKind::Eth);
  EXPECT_EQ(t.nics[0].speedMbps, 100000u);
  EXPECT_EQ(t.nics[0].loc.numa, 3);
  EXPECT_EQ(t.nics[0].loc.package, 1);
  auto nn = [&](int a, int b) { return classify(t, DevRef::numa(a), DevRef::numa(b)); };
  EXPECT_EQ(nn(0, 1), PathClass::Package);
  EXPECT_EQ(nn(1, 2), PathClass::CrossSocket);
  EXPECT_EQ(nn(2, 2), PathClass::Self);
  EXPECT_EQ(classify(t, DevRef::numa(3), DevRef::nic(0)), PathClass::Numa);
  EXPECT_EQ(classify(t, DevRef::numa(2), DevRef::nic(0)), PathClass::Package);
  EXPECT_EQ(classify(t, DevRef::numa(0), DevRef::nic(0)), PathClass::CrossSocket);
  EXPECT_EQ(classify(t, DevRef::package(1), DevRef::nic(0)), PathClass::Package);
  EXPECT_EQ(localityOfCpus(t, {8, 9, 40}).numa, 1);
  Locality pkg = localityOfCpus(t, {0, 8});  // two NUMA nodes of socket 0
  EXPECT_EQ(pkg.numa, -1);
  EXPECT_EQ(pkg.package, 0);
}

TEST(TopoXml, BuildMachineExport) {
  HostTopo t = loadXml(dataFile("this_vm.xml"));
  EXPECT_EQ(t.hostname, "vm");
  EXPECT_EQ(t.packages.size(), 1u);
  EXPECT_EQ(t.numas.size(), 1u);
  EXPECT_EQ(t.cores, 2);
  EXPECT_TRUE(t.gpus.empty());
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].name, "eth0");
  EXPECT_EQ(t.nics[0].loc.numa, 0);
  EXPECT_EQ(classify(t, DevRef::host(), DevRef::nic(0)), PathClass::Numa);
}

TEST(TopoXml, MissingAndCorruptFiles) {
  expectError([] { loadXml("/nonexistent/topo.xml"); }, collInvalidArgument,
              {"/nonexistent/topo.xml", "No such file"});
  TempDir dir;
  std::string bad = dir.path() + "/corrupt.xml";
  std::ofstream(bad) << "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n  <object type=\"Mach";
  expectError([&] { loadXml(bad); }, collInvalidArgument, {bad.c_str(), "not an hwloc XML topology"});
  std::string html = dir.path() + "/page.xml";
  std::ofstream(html) << "<html><body>not a topology</body></html>\n";
  expectError([&] { loadXml(html); }, collInvalidArgument, {html.c_str()});
  expectError([&] { loadXml(dir.path()); }, collInvalidArgument, {"not a regular file"});
  expectError([&] { discoverLocal(Config::fromEnv({{"COLL_TOPO_FILE", bad}})); }, collInvalidArgument,
              {"COLL_TOPO_FILE", "corrupt.xml"});
}

// A PU or NUMA node without an os_index (or with an absurd one) made hwloc build bitmaps
// of 512 MB and spend seconds on the file (found by fuzzing): refused, naming the line.
TEST(TopoXml, PuOrNumaNodeWithoutAPlausibleOsIndex) {
  TempDir dir;
  const std::string numa = "type=\"NUMANode\" os_index=\"0\"";
  for (const char* bad : {"type=\"NUMANode\"", "type=\"NUMANode\" os_index=\"4294967295\"",
                          "type=\"NUMANode\" os_index=\"-1\""}) {
    std::string path = editedCopy(dir, "gpu8_ib4.xml", numa, bad);
    expectError([&] { loadXml(path); }, collInvalidArgument, {path.c_str(), "NUMA node without a plausible os_index"});
  }
  std::string pu = editedCopy(dir, "gpu8_ib4.xml", "type=\"PU\" os_index=\"0\"", "type=\"PU\" os_index=\"1048576\"");
  expectError([&] { loadXml(pu); }, collInvalidArgument, {"PU without a plausible os_index", "line "});
}

// An object with a cpuset but no complete_cpuset crashed hwloc_topology_load (a null
// dereference inside hwloc; found by fuzzing): refused before hwloc reads the file.
TEST(TopoXml, ObjectWithASetButNoCompleteSet) {
  TempDir dir;
  for (const char* set : {"cpuset", "nodeset"}) {
    const std::string from = std::string(" complete_") + set + "=";
    std::string path = editedCopy(dir, "gpu8_ib4.xml", from, std::string(" complete_") + set + "_typo=");
    expectError([&] { loadXml(path); }, collInvalidArgument,
                {path.c_str(), (std::string("with a ") + set + " but no complete_" + set).c_str()});
  }
}

// hwloc_bitmap_sscanf asserts, aborting the process, on a set starting with a comma
// (found by fuzzing): every bitmap attribute is checked before hwloc reads the file.
TEST(TopoXml, BitmapThatHwlocCannotRead) {
  TempDir dir;
  const std::string good = " cpuset=\"0x00000001\"";
  for (const char* bad : {",x00000001", ",0x1", "0x1,", "1", "0x", "0x123456789", "0x1,,0x2", "0xf...f0x1", " 0x1"}) {
    std::string path = editedCopy(dir, "gpu8_ib4.xml", good, std::string(" cpuset=\"") + bad + "\"");
    expectError([&] { loadXml(path); }, collInvalidArgument, {path.c_str(), "cpuset is not a bitmap", "line "});
  }
  std::string nodeset = editedCopy(dir, "gpu8_ib4.xml", " complete_nodeset=\"0x00000001\"", " complete_nodeset=\",\"");
  expectError([&] { loadXml(nodeset); }, collInvalidArgument, {"complete_nodeset is not a bitmap"});
  // What hwloc writes stays readable: the full set, and words above the first.
  std::string full = editedCopy(dir, "gpu8_ib4.xml", " allowed_cpuset=\"", " allowed_cpuset=\"0xf...f,");
  EXPECT_NO_THROW(loadXml(full));
}

TEST(TopoXml, NicSpeedThatIsNotANumberOfMbps) {
  TempDir dir;
  const std::string good = "<info name=\"LinkSpeedMbps\" value=\"200000\"/>";
  // strtoull took "-1" and an overflow as 2^64-1 Mb/s: 2.3e15 GB/s for the cost model.
  for (const char* bad : {"-1", "99999999999999999999999", "fast", "2e5", "", "1000000001"}) {
    std::string path = editedCopy(dir, "gpu8_ib4.xml", good,
                                  std::string("<info name=\"LinkSpeedMbps\" value=\"") + bad + "\"/>");
    expectError([&] { loadXml(path); }, collInvalidArgument,
                {path.c_str(), "NIC mlx5_0", (std::string("LinkSpeedMbps '") + bad + "'").c_str()});
  }
  std::string zero = editedCopy(dir, "gpu8_ib4.xml", good, "<info name=\"LinkSpeedMbps\" value=\"0\"/>");
  EXPECT_EQ(loadXml(zero).nics[1].speedMbps, 0u) << "0 stays 'unknown'";
}

TEST(TopoXml, TwoGpusWithOneBusId) {
  // Bus ids name GPUs (findGpuByBusId, the NVLink matrix): a repeated one used to drop
  // the NVLink between GPUs 0 and 1 without a word.
  TempDir dir;
  std::string path = editedCopy(dir, "gpu8_ib4.xml", "pci_busid=\"0000:1a:00.0\"", "pci_busid=\"0000:19:00.0\"");
  expectError([&] { loadXml(path); }, collInvalidArgument, {path.c_str(), "GPUs 0 and 1", "0000:19:00.0"});
}

TEST(TopoXml, UnreadableFileIsNotCalledCorrupt) {
  TempDir dir;
  std::string path = dir.path() + "/locked.xml";
  std::ofstream(path) << std::ifstream(dataFile("this_vm.xml")).rdbuf();
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(path.c_str(), 0), 0);
  // Root reads any file, so the check runs as nobody in a child process.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    if (geteuid() == 0 && (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)) _exit(3);
    std::string msg = "loaded";
    try {
      loadXml(path);
    } catch (const Error& e) {
      msg = std::to_string(e.code()) + " " + e.what();
    }
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "could not drop privileges";
  EXPECT_EQ(msg.rfind(std::to_string(collInvalidArgument) + " ", 0), 0u) << msg;
  EXPECT_NE(msg.find("cannot read the hwloc XML file '" + path + "': Permission denied"), std::string::npos)
      << msg;
}

// The environment is the subject: a user points COLL_TOPO_FILE and COLL_TOPO_DUMP_FILE
// at files without changing the program.
TEST(TopoXml, TopoFileAndDumpRoundTrip) {
  TempDir dir;
  EnvGuard file("COLL_TOPO_FILE", dataFile("gpu8_ib4.xml"));
  EnvGuard dump("COLL_TOPO_DUMP_FILE", dir.path() + "/dump-%p.xml");
  HostTopo a = discoverLocal(Config::fromEnv());
  EXPECT_EQ(a.source, "xml " + dataFile("gpu8_ib4.xml"));
  std::string path = dir.path() + "/dump-" + std::to_string(getpid()) + ".xml";
  HostTopo b = loadXml(path);
  EXPECT_EQ(b.source, "xml " + path);
  b.source = a.source;
  EXPECT_EQ(describeHost(a), describeHost(b));
  EXPECT_EQ(describePaths(a), describePaths(b));
  EXPECT_EQ(b.nvlinkGBs, a.nvlinkGBs);
  EXPECT_EQ(b.gpus.size(), 8u);
}

TEST(TopoDiscover, ThisMachineAndItsDump) {
  TempDir dir;
  HostTopo live = discoverLocal(Config::fromEnv({{"COLL_TOPO_DUMP_FILE", dir.path() + "/%h.xml"}, {"COLL_TOPO_CACHE", "0"}}));
  EXPECT_TRUE(live.detailed);
  EXPECT_EQ(live.source, "hwloc");
  ASSERT_GE(live.packages.size(), 1u);
  ASSERT_GE(live.numas.size(), 1u);
  std::vector<int> cpus = boundCpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_GE(live.pus, static_cast<int>(cpus.size()));
  // Every CPU we may run on belongs to one of the NUMA nodes found.
  for (int c : cpus) EXPECT_GE(localityOfCpus(live, {c}).numa, 0) << "cpu " << c;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  HostTopo back = loadXml(dir.path() + "/" + host + ".xml");
  EXPECT_EQ(back.pus, live.pus);
  EXPECT_EQ(back.numas.size(), live.numas.size());
  ASSERT_EQ(back.nics.size(), live.nics.size());
  for (size_t i = 0; i < live.nics.size(); ++i) {
    EXPECT_EQ(back.nics[i].name, live.nics[i].name);
    EXPECT_EQ(back.nics[i].speedMbps, live.nics[i].speedMbps) << "the dump keeps sysfs speeds";
  }
}

TEST(TopoDiscover, UnwritableDumpIsOnlyAWarning) {
  EXPECT_TRUE(discoverLocal(Config::fromEnv({{"COLL_TOPO_DUMP_FILE", "/nonexistent-dir/topo.xml"}})).detailed);
}

#else  // built without hwloc

TEST(TopoNoHwloc, HostGroupingOnly) {
  HostTopo t = discoverLocal(Config::fromEnv());
  EXPECT_FALSE(t.detailed);
  EXPECT_FALSE(t.hostname.empty());
  EXPECT_GE(t.pus, 1);
  EXPECT_TRUE(t.numas.empty());
  EXPECT_EQ(localityOfCpus(t, boundCpus()).numa, -1);
  expectError([] { loadXml(dataFile("gpu8_ib4.xml")); }, collInvalidUsage, {"without hwloc"});
  EXPECT_FALSE(discoverLocal(Config::fromEnv({{"COLL_TOPO_FILE", dataFile("gpu8_ib4.xml")}})).detailed);  // ignored with a warning
}

#endif

}  // namespace
}  // namespace coll
