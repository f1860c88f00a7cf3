// The job-level topology: host groups, local ranks, leaders, per-pair paths and costs,
// ring order, and the checks on placements received from peers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <set>

#include "bootstrap/bootstrap.hpp"
#include "coll_config.h"
#include "base/config.hpp"
#include "topology/job.hpp"
#include "topo_test_util.hpp"

namespace coll {
namespace {

using test::dataFile;
using test::EnvGuard;
using test::expectError;
using test::place;

// Each host's ranks form one contiguous run of the ring, and the ring is a permutation.
void expectHostsContiguous(const JobTopo& job, const std::vector<int>& ring) {
  std::vector<int> sorted = ring;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> all(job.nranks());
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  std::set<int> closed;
  for (size_t i = 0; i < ring.size(); ++i) {
    int h = job.hostOf(ring[i]);
    EXPECT_EQ(closed.count(h), 0u) << "host " << h << " entered twice";
    if (i + 1 < ring.size() && job.hostOf(ring[i + 1]) != h) closed.insert(h);
  }
}

HostTopo hostOnly() {
  HostTopo t;
  t.hostname = "n";
  t.pus = 16;
  return t;
}

TEST(TopoJob, HostGroupsWithoutHardwareDetail) {
  HostTopo t = hostOnly();
  const char* ids[] = {"h0", "h1", "h0", "h2", "h1", "h0"};
  const int cpu[] = {9, 1, 3, 2, 4, 5};
  std::vector<RankPlacement> ps;
  for (int r = 0; r < 6; ++r) ps.push_back(place(t, r, ids[r], {cpu[r]}));
  JobTopo job(ps, LinkTable::defaults());
  ASSERT_EQ(job.nhosts(), 3);
  EXPECT_EQ(job.hosts()[0].hostId, "h0");
  EXPECT_EQ(job.hosts()[0].ranks, (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(job.hosts()[1].ranks, (std::vector<int>{1, 4}));
  EXPECT_EQ(job.hosts()[2].ranks, (std::vector<int>{3}));
  EXPECT_EQ(job.leaders(), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(job.localRank(5), 2);
  EXPECT_EQ(job.localSize(4), 2);
  EXPECT_EQ(job.leaderOf(4), 1);
  // Nothing is known inside a host but the CPUs' order.
  EXPECT_EQ(ringOrder(job), (std::vector<int>{2, 5, 0, 1, 4, 3}));
  expectHostsContiguous(job, ringOrder(job));
  EXPECT_EQ(job.pathClass(0, 2), PathClass::CrossSocket);
  EXPECT_EQ(job.pathClass(0, 0), PathClass::Self);
  RankLink net = job.link(0, 1);
  EXPECT_EQ(net.cls, PathClass::Network);
  EXPECT_DOUBLE_EQ(net.bwGBs, LinkTable::defaults().ethernet.bwGBs);  // no NIC known: TCP assumed
  EXPECT_DOUBLE_EQ(net.latUs, LinkTable::defaults().ethernet.latUs);
  expectError([&] { job.pathClass(0, 6); }, collInvalidArgument, {"rank b 6", "6 ranks"});
  expectError([&] { job.hostOf(-1); }, collInvalidArgument, {"rank -1"});
}

// n ranks, two per host (h0, h0, h1, h1, ...), each input finished by `fill`.
std::vector<RankPlacement> twoPerHost(const HostTopo& t, size_t n, const std::function<void(PlacementInput&)>& fill) {
  std::vector<RankPlacement> ps;
  for (size_t r = 0; r < n; ++r) {
    PlacementInput in;
    in.rank = static_cast<int>(r);
    in.hostId = in.hostname = "h" + std::to_string(r / 2);
    in.pid = 100 + in.rank;
    fill(in);
    ps.push_back(makePlacement(t, in));
  }
  return ps;
}

// Simulated hosts on one kernel: where ranks are pinned, a later host's leader avoids the
// CPUs of earlier leaders; unpinned ranks, or hosts on kernels of their own, keep the
// lowest rank.
TEST(TopoJob, LeadersOfSimulatedHostsAvoidEachOthersCpus) {
  HostTopo t = hostOnly();
  auto leaders = [&](const std::vector<std::vector<int>>& cpus, uint64_t kernel) {
    return JobTopo(twoPerHost(t, cpus.size(), [&](PlacementInput& in) {
                     in.cpus = cpus[static_cast<size_t>(in.rank)];
                     in.kernelId = kernel;
                   }),
                   LinkTable::defaults())
        .leaders();
  };
  // Each host pinned its local ranks to CPUs 0 and 1: host h1 leads from CPU 1.
  EXPECT_EQ(leaders({{0}, {1}, {0}, {1}}, 7), (std::vector<int>{0, 3}));
  // Already apart, or apart only by a later rank.
  EXPECT_EQ(leaders({{0}, {1}, {1}, {0}}, 7), (std::vector<int>{0, 2}));
  EXPECT_EQ(leaders({{0}, {1}, {0}, {1}, {0}, {2}}, 7), (std::vector<int>{0, 3, 5}));
  // Every CPU taken: the lowest rank.
  EXPECT_EQ(leaders({{0}, {1}, {0}, {1}, {0}, {1}}, 7), (std::vector<int>{0, 3, 4}));
  // Kernel unknown (real hosts) or ranks free to move: nothing to avoid.
  EXPECT_EQ(leaders({{0}, {1}, {0}, {1}}, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(leaders({{0, 1}, {0, 1}, {0, 1}, {0, 1}}, 7), (std::vector<int>{0, 2}));
}

// The round trip each rank measured to the root (rank 0's process) sets the latency of a
// network pair when it is longer than the table's, unless the user set the latency.
TEST(TopoJob, MeasuredRoundTripLengthensTheNetwork) {
  HostTopo t = hostOnly();
  auto job = [&](std::vector<double> rtt, const LinkTable& table) {
    return JobTopo(twoPerHost(t, rtt.size(), [&](PlacementInput& in) {
                     in.cpus = {in.rank};
                     in.rootRttUs = rtt[static_cast<size_t>(in.rank)];
                   }),
                   table);
  };
  const LinkTable defaults = LinkTable::defaults();
  const double lat = defaults.ethernet.latUs;
  JobTopo delayed = job({0, 30, 2100, 2200, 900}, defaults);
  EXPECT_DOUBLE_EQ(delayed.link(0, 2).latUs, 1050);  // half rank 2's round trip
  EXPECT_DOUBLE_EQ(delayed.link(3, 1).latUs, 1100);
  EXPECT_DOUBLE_EQ(delayed.link(2, 4).latUs, 1050);  // the farther of the two ends
  EXPECT_DOUBLE_EQ(delayed.link(0, 1).latUs, defaults.of(delayed.pathClass(0, 1)).latUs);  // same host
  // Round trips shorter than the table's latency, or unknown (0): the table stands.
  EXPECT_DOUBLE_EQ(job({0, 0, 20, 20, 0}, defaults).link(0, 2).latUs, lat);
  EXPECT_DOUBLE_EQ(job({0, 0, 0, 0, 0}, defaults).link(0, 2).latUs, lat);
  Config cfg = Config::fromEnv();
  cfg.set("COLL_TOPO_LINK_LAT", "ethernet=40");
  EXPECT_DOUBLE_EQ(job({0, 30, 2100, 2200, 900}, LinkTable::fromConfig(cfg)).link(0, 2).latUs, 40);
  PlacementInput bad;
  bad.rank = 3;
  bad.hostId = "A";
  bad.rootRttUs = -5;
  expectError([&] { makePlacement(t, bad); }, collInvalidArgument, {"rank 3", "round-trip time"});
}

// Once transports are chosen, a network pair is priced by how it travels: kernel bypass
// takes the RDMA entry, and the round trip measured over the bootstrap's TCP connection
// does not apply to it; TCP takes the ethernet entry and the round trip, even between
// RDMA-capable NICs (IP over InfiniBand). Before (or for a plugin) the NICs decide.
TEST(TopoJob, NetPathsPriceTheNetworkByTransport) {
  HostTopo t = hostOnly();
  std::vector<RankPlacement> ps = twoPerHost(t, 4, [](PlacementInput& in) {
    in.cpus = {in.rank};
    in.rootRttUs = in.rank >= 2 ? 60 : 0;  // 30 us one way
  });
  for (RankPlacement& p : ps) {
    p.nic = 0;
    p.nicKind = static_cast<uint8_t>(NicKind::Ib);
    p.nicPath = static_cast<uint8_t>(PathClass::Package);
    p.nicSpeedMbps = 200000;
  }
  const LinkTable table = LinkTable::defaults();
  JobTopo job(ps, table);
  EXPECT_DOUBLE_EQ(job.link(0, 2).latUs, 30);  // unknown: the RDMA entry, lengthened
  EXPECT_DOUBLE_EQ(job.link(0, 2).bwGBs, 25);  // the NICs' 200 Gb/s
  job.setNetPaths({NetPath::Bypass, NetPath::Bypass, NetPath::Bypass, NetPath::Bypass});
  EXPECT_DOUBLE_EQ(job.link(0, 2).latUs, table.of(PathClass::Network).latUs);
  EXPECT_DOUBLE_EQ(job.link(0, 2).bwGBs, 25);
  EXPECT_TRUE(job.kernelBypass(1, 3));
  // Sub-communicators keep the paths.
  EXPECT_TRUE(subJob(job, {0, 2}).kernelBypass(0, 1));
  job.setNetPaths({NetPath::Kernel, NetPath::Kernel, NetPath::Bypass, NetPath::Bypass});
  EXPECT_DOUBLE_EQ(job.link(0, 2).latUs, 30);
  EXPECT_GT(table.ethernet.latUs, table.of(PathClass::Network).latUs);
  ps[0].rootRttUs = ps[2].rootRttUs = 0;
  JobTopo quiet(ps, table);
  quiet.setNetPaths({NetPath::Kernel, NetPath::Kernel, NetPath::Kernel, NetPath::Kernel});
  EXPECT_DOUBLE_EQ(quiet.link(0, 3).latUs, 30);  // rank 3 still measured its round trip
  EXPECT_DOUBLE_EQ(quiet.link(0, 1).latUs, table.of(quiet.pathClass(0, 1)).latUs);  // same host
  ps[2].rootRttUs = ps[3].rootRttUs = 0;
  JobTopo unmeasured(ps, table);
  unmeasured.setNetPaths({NetPath::Kernel, NetPath::Kernel, NetPath::Kernel, NetPath::Kernel});
  EXPECT_DOUBLE_EQ(unmeasured.link(0, 2).latUs, table.ethernet.latUs);
  EXPECT_DOUBLE_EQ(unmeasured.link(0, 2).bwGBs, 25);  // the NIC speed still bounds it
}

// The environment is the subject: COLL_HOST_ID set by a launcher or a user.
TEST(TopoJob, HostIdFromEnvironment) {
  EnvGuard id("COLL_HOST_ID", "sim-host-7");
  RankPlacement p = place(hostOnly(), 0, localHostId(), {0});
  EXPECT_STREQ(p.hostId, "sim-host-7");
}

TEST(TopoJob, PlacementArgumentErrors) {
  HostTopo t = hostOnly();
  expectError([&] { place(t, 0, "", {0}); }, collInvalidArgument, {"host id", "COLL_HOST_ID"});
  expectError([&] { place(t, 0, std::string(300, 'x'), {0}); }, collInvalidArgument, {"255"});
  expectError([&] { place(t, 3, "h", {0}, 0); }, collInvalidArgument, {"rank 3 names GPU 0", "0 GPUs"});
  expectError([] { JobTopo({}, LinkTable::defaults()); }, collInvalidArgument, {"at least one"});
}

TEST(TopoJob, CorruptPlacementsFromPeers) {
  HostTopo t = hostOnly();
  std::vector<RankPlacement> good{place(t, 0, "a", {0}), place(t, 1, "b", {1})};
  auto expectBad = [&](auto mutate, const char* fragment) {
    std::vector<RankPlacement> ps = good;
    mutate(ps[1]);
    expectError([&] { JobTopo(ps, LinkTable::defaults()); }, collRemoteError, {"rank 1", fragment});
  };
  expectBad([](RankPlacement& p) { p.magic = 7; }, "layout version");
  expectBad([](RankPlacement& p) { p.rank = 5; }, "bad rank (5)");
  expectBad([](RankPlacement& p) { memset(p.hostId, 'x', sizeof p.hostId); }, "host id");
  expectBad([](RankPlacement& p) { p.hostId[0] = 0; }, "host id");
  expectBad([](RankPlacement& p) { memset(p.nicName, 'x', sizeof p.nicName); }, "NIC name");
  expectBad([](RankPlacement& p) { p.numa = -3; }, "NUMA node");
  expectBad([](RankPlacement& p) { p.hostGpus = 2; p.gpu = 2; }, "GPU index");
  expectBad([](RankPlacement& p) { p.hostGpus = 200; }, "GPU count");
  expectBad([](RankPlacement& p) { p.hostGpus = 2; p.gpu = 0; p.gpuPath[1] = 9; }, "GPU path class");
  expectBad([](RankPlacement& p) { p.nic = 0; p.nicPath = 12; }, "NIC path");
  expectBad([](RankPlacement& p) { p.netPath = 3; }, "network path");
  expectBad([](RankPlacement& p) { p.rootRttUs = -1; }, "round-trip time");
  expectBad([](RankPlacement& p) { p.rootRttUs = std::numeric_limits<float>::quiet_NaN(); }, "round-trip time");
  EXPECT_NO_THROW(JobTopo(good, LinkTable::defaults()));
}

#if COLL_HAVE_HWLOC

std::vector<int> allCpus(const HostTopo& t) {
  std::vector<int> cpus;
  for (const PackageInfo& p : t.packages) cpus.insert(cpus.end(), p.cpus.begin(), p.cpus.end());
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

// The interface the sockets use (netdev.hpp) sets the network speed where hwloc sees no
// NIC (veth, bridges), and lowers a known NIC's speed when it is shaped below it.
TEST(TopoJob, InterfaceSpeedBoundsTheNetwork) {
  auto placeWithNet = [](const HostTopo& t, int rank, const std::string& host, std::vector<int> cpus,
                         const std::string& ifname, uint64_t mbps) {
    PlacementInput in;
    in.rank = rank;
    in.hostId = in.hostname = host;
    in.pid = 1000 + rank;
    in.cpus = std::move(cpus);
    in.netName = ifname;
    in.netSpeedMbps = mbps;
    return makePlacement(t, in);
  };
  HostTopo bare = hostOnly();
  JobTopo veth({placeWithNet(bare, 0, "A", {0}, "veth0", 1000), placeWithNet(bare, 1, "B", {0}, "veth0", 2000)},
               LinkTable::defaults());
  EXPECT_EQ(veth.placement(0).nic, -1);
  EXPECT_STREQ(veth.placement(0).nicName, "veth0");
  EXPECT_DOUBLE_EQ(veth.link(0, 1).bwGBs, 0.125);  // the slower end, 1 Gb/s
  JobTopo unknown({placeWithNet(bare, 0, "A", {0}, "", 0), placeWithNet(bare, 1, "B", {0}, "veth0", 1000)},
                  LinkTable::defaults());
  EXPECT_DOUBLE_EQ(unknown.link(0, 1).bwGBs, LinkTable::defaults().ethernet.bwGBs);

  HostTopo epyc = loadXml(dataFile("epyc_nps2_eth.xml"));  // ens6f0, 100 GbE
  auto cpus = epyc.numas[3].cpus;
  JobTopo shaped({placeWithNet(epyc, 0, "X", cpus, "ens6f0", 10000), placeWithNet(epyc, 1, "Y", cpus, "ens6f0", 10000)},
                 LinkTable::defaults());
  EXPECT_DOUBLE_EQ(shaped.link(0, 1).bwGBs, 1.25);
  JobTopo other({placeWithNet(epyc, 0, "X", cpus, "eth9", 10000), placeWithNet(epyc, 1, "Y", cpus, "eth9", 10000)},
                LinkTable::defaults());
  EXPECT_DOUBLE_EQ(other.link(0, 1).bwGBs, 12.5) << "another interface says nothing about ens6f0";
  JobTopo faster({placeWithNet(epyc, 0, "X", cpus, "ens6f0", 400000), placeWithNet(epyc, 1, "Y", cpus, "ens6f0", 400000)},
                 LinkTable::defaults());
  EXPECT_DOUBLE_EQ(faster.link(0, 1).bwGBs, 12.5) << "a shaper cannot make the NIC faster";
}

// Two 8-GPU servers, ranks numbered across them alternately, GPUs handed out unevenly.
TEST(TopoJob, GpuServersInterleaved) {
  HostTopo t = loadXml(dataFile("gpu8_ib4.xml"));
  const int gpuA[] = {6, 0, 4, 1};  // ranks 0, 2, 4, 6 on host A
  std::vector<RankPlacement> ps;
  for (int r = 0; r < 8; ++r) {
    int gpu = r % 2 == 0 ? gpuA[r / 2] : r / 2;
    ps.push_back(place(t, r, r % 2 ? "B" : "A", t.numas[gpu / 4].cpus, gpu));
  }
  JobTopo job(ps, LinkTable::defaults());
  ASSERT_EQ(job.nhosts(), 2);
  EXPECT_EQ(job.hosts()[0].ranks, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(job.hosts()[1].ranks, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(job.localRank(4), 2);
  EXPECT_EQ(job.leaders(), (std::vector<int>{0, 1}));  // every GPU has an HCA on its switch
  EXPECT_EQ(job.placement(0).nic, 4);                  // GPU6 -> mlx5_3
  EXPECT_EQ(static_cast<PathClass>(job.placement(0).nicPath), PathClass::PciSwitch);
  EXPECT_EQ(job.placement(0).numa, 1);

  std::vector<int> ring = ringOrder(job);
  EXPECT_EQ(ring, (std::vector<int>{2, 6, 4, 0, 1, 3, 5, 7}));  // host A by GPU locality
  expectHostsContiguous(job, ring);

  EXPECT_EQ(job.pathClass(2, 6), PathClass::NVLink);       // GPU0 - GPU1
  EXPECT_DOUBLE_EQ(job.link(2, 6).bwGBs, 300.0);           // from hwloc's NVLink matrix
  EXPECT_EQ(job.pathClass(0, 4), PathClass::Numa);         // GPU6 - GPU4
  EXPECT_EQ(job.pathClass(2, 4), PathClass::CrossSocket);  // GPU0 - GPU4
  EXPECT_EQ(job.pathClass(1, 5), PathClass::HostBridge);   // GPU0 - GPU2 on host B
  RankLink net = job.link(0, 1);
  EXPECT_EQ(net.cls, PathClass::Network);
  EXPECT_DOUBLE_EQ(net.bwGBs, 25.0);  // 200 Gb/s HDR on both ends
  EXPECT_DOUBLE_EQ(net.latUs, LinkTable::defaults().of(PathClass::Network).latUs);
  RankLink pci = job.link(1, 5);
  EXPECT_DOUBLE_EQ(pci.bwGBs, LinkTable::defaults().of(PathClass::HostBridge).bwGBs);
}

// Two HGX H100 hosts, a rank per GPU: NVLink between any two GPUs of a host (through the
// NVSwitches, at 450 GB/s), each rank's NIC the RoCE port on its GPU's PCIe switch, so
// every rank is as close to a NIC as the others and the ring keeps the GPU order.
TEST(TopoJob, HgxServersOneRankPerGpu) {
  HostTopo t = loadXml(dataFile("hgx_h100_roce.xml"));
  std::vector<RankPlacement> ps;
  for (int r = 0; r < 16; ++r) {
    const int gpu = 7 - r % 8;  // ranks handed the GPUs in reverse
    ps.push_back(place(t, r, r < 8 ? "A" : "B", t.numas[gpu / 4].cpus, gpu, r % 8));
  }
  JobTopo job(ps, LinkTable::defaults());
  for (int r = 0; r < 16; ++r) {
    const int gpu = 7 - r % 8;
    EXPECT_EQ(job.placement(r).nic, gpu / 2) << r;
    EXPECT_EQ(std::string(job.placement(r).nicName), "mlx5_" + std::to_string(gpu / 2)) << r;
    EXPECT_EQ(static_cast<NicKind>(job.placement(r).nicKind), NicKind::Roce) << r;
    EXPECT_EQ(static_cast<PathClass>(job.placement(r).nicPath), PathClass::PciSwitch) << r;
  }
  EXPECT_EQ(job.pathClass(0, 7), PathClass::NVLink);  // GPU7 - GPU0, across the sockets
  EXPECT_DOUBLE_EQ(job.link(0, 7).bwGBs, 450.0);
  EXPECT_EQ(job.link(0, 8).cls, PathClass::Network);
  EXPECT_DOUBLE_EQ(job.link(0, 8).bwGBs, 50.0);  // 400 Gb/s RoCE on both ends
  EXPECT_EQ(ringOrder(job), (std::vector<int>{7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8}));
  EXPECT_EQ(ringOrder(job), localityOrder(job));
}

// Two EPYC hosts (4 NUMA nodes, one 100 GbE port on NUMA node 3), one rank per NUMA node.
TEST(TopoJob, CpuServersNicAffinity) {
  HostTopo t = loadXml(dataFile("epyc_nps2_eth.xml"));
  const int numaX[] = {3, 2, 1, 0};  // ranks 0, 2, 4, 6 on host X
  std::vector<RankPlacement> ps;
  for (int r = 0; r < 8; ++r) {
    int numa = r % 2 == 0 ? numaX[r / 2] : r / 2;
    ps.push_back(place(t, r, r % 2 ? "Y" : "X", t.numas[numa].cpus));
  }
  JobTopo job(ps, LinkTable::defaults());
  // Leaders sit next to the NIC: rank 0 on X (NUMA 3), rank 7 on Y.
  EXPECT_EQ(job.leaders(), (std::vector<int>{0, 7}));
  EXPECT_EQ(static_cast<PathClass>(job.placement(1).nicPath), PathClass::CrossSocket);
  EXPECT_EQ(static_cast<PathClass>(job.placement(5).nicPath), PathClass::Package);
  // Each host's run starts at its rank on the NIC's node (X: 0, Y: 7) and ends at the
  // rank on the NIC's socket (X: 2, Y: 5), the other ranks in NUMA order in between; in
  // plain locality order (6 4 2 0 | 1 3 5 7) the network fed ranks on the far socket.
  std::vector<int> ring = ringOrder(job);
  EXPECT_EQ(ring, (std::vector<int>{0, 6, 4, 2, 7, 1, 3, 5}));
  expectHostsContiguous(job, ring);
  for (int r : {0, 7}) EXPECT_EQ(static_cast<PathClass>(job.placement(r).nicPath), PathClass::Numa) << r;
  for (int r : {2, 5}) EXPECT_EQ(static_cast<PathClass>(job.placement(r).nicPath), PathClass::Package) << r;
  EXPECT_EQ(job.pathClass(6, 4), PathClass::Package);
  EXPECT_EQ(job.pathClass(4, 2), PathClass::CrossSocket);
  EXPECT_EQ(job.pathClass(2, 0), PathClass::Package);
  EXPECT_DOUBLE_EQ(job.link(6, 4).bwGBs, LinkTable::defaults().of(PathClass::Package).bwGBs);
  RankLink net = job.link(0, 1);
  EXPECT_DOUBLE_EQ(net.bwGBs, 12.5);  // 100 GbE
  EXPECT_DOUBLE_EQ(net.latUs, LinkTable::defaults().ethernet.latUs);

  // A sub-communicator of old ranks 7, 0, 5 keeps their places: Y = {0, 2}, X = {1}.
  JobTopo sub = subJob(job, {7, 0, 5});
  ASSERT_EQ(sub.nranks(), 3);
  EXPECT_EQ(sub.hosts()[0].hostId, "Y");
  EXPECT_EQ(sub.hosts()[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(sub.leaders(), (std::vector<int>{0, 1}));
  EXPECT_EQ(sub.pathClass(0, 2), PathClass::Package);  // NUMA 3 and 2
  EXPECT_EQ(sub.placement(1).numa, 3);
  expectError([&] { subJob(job, {1, 1}); }, collInvalidArgument, {"rank 1 appears twice"});
  expectError([&] { subJob(job, {8}); }, collInvalidArgument, {"rank 8"});

  // The user's figure wins over the NIC speed.
  JobTopo tuned(ps, LinkTable::fromConfig(Config::fromEnv({{"COLL_TOPO_LINK_BW", "ethernet=2"}})));
  EXPECT_DOUBLE_EQ(tuned.link(0, 1).bwGBs, 2.0);

  // A rank allowed on every CPU has no NUMA home: assumed to cross sockets.
  ps[2] = place(t, 2, "X", t.packages[0].cpus);
  ps[4] = place(t, 4, "X", allCpus(t));
  JobTopo loose(ps, LinkTable::defaults());
  EXPECT_EQ(loose.placement(2).package, 0);
  EXPECT_EQ(loose.placement(2).numa, -1);
  EXPECT_EQ(loose.pathClass(2, 6), PathClass::Package);
  EXPECT_EQ(loose.pathClass(4, 6), PathClass::CrossSocket);
  expectHostsContiguous(loose, ringOrder(loose));
}

// Two ranks on each NUMA node of two EPYC hosts (one NIC, on NUMA node 3): each host's
// run is its locality order cut between the two ranks on the NIC's node, so both ends sit
// there; the inter-socket hops stay two, as in the plain order.
TEST(TopoJob, RingEndsNextToTheNic) {
  HostTopo t = loadXml(dataFile("epyc_nps2_eth.xml"));
  auto half = [](const std::vector<int>& c, int h) {
    const size_t mid = c.size() / 2;
    return h == 0 ? std::vector<int>(c.begin(), c.begin() + mid) : std::vector<int>(c.begin() + mid, c.end());
  };
  std::vector<RankPlacement> ps;
  for (int r = 0; r < 16; ++r) ps.push_back(place(t, r, r < 8 ? "X" : "Y", half(t.numas[(r % 8) / 2].cpus, r % 2)));
  JobTopo job(ps, LinkTable::defaults());
  std::vector<int> ring = ringOrder(job);
  EXPECT_EQ(ring, (std::vector<int>{7, 0, 1, 2, 3, 4, 5, 6, 15, 8, 9, 10, 11, 12, 13, 14}));
  expectHostsContiguous(job, ring);
  for (int r : {6, 7, 14, 15}) EXPECT_EQ(static_cast<PathClass>(job.placement(r).nicPath), PathClass::Numa) << r;
  auto crossSocketHops = [&](const std::vector<int>& order, int from, int to) {
    int c = 0;
    for (int i = from; i + 1 < to; ++i) c += job.pathClass(order[i], order[i + 1]) == PathClass::CrossSocket;
    return c;
  };
  EXPECT_EQ(crossSocketHops(ring, 0, 8), 2);
  // The trees and halving keep the plain locality order.
  EXPECT_EQ(localityOrder(job), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));

  // One host: no network hop to place.
  std::vector<RankPlacement> one(ps.begin(), ps.begin() + 8);
  EXPECT_EQ(ringOrder(JobTopo(one, LinkTable::defaults())), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));

  // All ranks of a host equally far from the NIC (NUMA node 0): nothing moves.
  std::vector<RankPlacement> far;
  for (int r = 0; r < 6; ++r) far.push_back(place(t, r, r < 3 ? "X" : "Y", {t.numas[0].cpus[r % 3]}));
  EXPECT_EQ(ringOrder(JobTopo(far, LinkTable::defaults())), (std::vector<int>{0, 1, 2, 3, 4, 5}));

  // Two ranks on a host are both ends whatever their order; a host without NIC
  // information keeps its CPU order.
  HostTopo plain = hostOnly();
  std::vector<RankPlacement> mixed{place(t, 0, "X", half(t.numas[3].cpus, 0)), place(t, 1, "X", half(t.numas[0].cpus, 0)),
                                   place(plain, 2, "Y", {3}), place(plain, 3, "Y", {1}), place(plain, 4, "Y", {2})};
  EXPECT_EQ(ringOrder(JobTopo(mixed, LinkTable::defaults())), (std::vector<int>{1, 0, 3, 4, 2}));
}

// NICs on both sockets. CPU ranks on gpu8_ib4 (HCAs on both NUMA nodes): every rank has
// one on its own node, so no cut beats the plain order. The EPYC host with a second port
// on NUMA node 1, one rank per node: the ranks on nodes 1 and 3 are next to a NIC, but
// a walk that starts and ends at them crosses the sockets three times instead of once
// (1 2 0 3), so the plain order stays.
TEST(TopoJob, RingOrderWithNicsOnBothSockets) {
  HostTopo t = loadXml(dataFile("gpu8_ib4.xml"));
  std::vector<RankPlacement> ps;
  for (int r = 0; r < 8; ++r) ps.push_back(place(t, r, r < 4 ? "A" : "B", {t.numas[(r % 4) / 2].cpus[r % 2]}, -1, r % 4));
  JobTopo job(ps, LinkTable::defaults());
  for (int r = 0; r < 8; ++r) EXPECT_EQ(static_cast<PathClass>(job.placement(r).nicPath), PathClass::Numa) << r;
  EXPECT_EQ(ringOrder(job), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));

  HostTopo epyc = loadXml(dataFile("epyc_nps2_eth.xml"));
  ASSERT_EQ(epyc.nics.size(), 1u);
  NicInfo second = epyc.nics[0];
  second.name = second.netdev = "ens2f0";
  second.busId.clear();
  second.pciPath.clear();
  second.loc = {epyc.numas[1].package, 1};
  epyc.nics.push_back(second);
  std::vector<RankPlacement> two;
  for (int r = 0; r < 8; ++r) two.push_back(place(epyc, r, r < 4 ? "X" : "Y", epyc.numas[r % 4].cpus));
  JobTopo both(two, LinkTable::defaults());
  EXPECT_EQ(static_cast<PathClass>(both.placement(1).nicPath), PathClass::Numa);
  EXPECT_EQ(static_cast<PathClass>(both.placement(0).nicPath), PathClass::Package);
  EXPECT_EQ(ringOrder(both), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

#endif

}  // namespace
}  // namespace coll
