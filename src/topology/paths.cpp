// Path classification inside one host, NIC choice, and the assumed cost of each class.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <tuple>

#include "base/config.hpp"
#include "base/error.hpp"
#include "topology/path.hpp"
#include "topology/topology.hpp"

namespace coll {

COLL_PARAM(kTopoLinkBw, "COLL_TOPO_LINK_BW", "",
           "assumed GB/s per path class, e.g. 'nvlink=40,network=25,ethernet=3'");
COLL_PARAM(kTopoLinkLat, "COLL_TOPO_LINK_LAT", "",
           "assumed latency in us per path class, e.g. 'network=2,ethernet=30'");

namespace {

const char* kClassNames[kNumPathClasses] = {"self", "nvlink", "pci-switch", "host-bridge",
                                            "numa", "package", "cross-socket", "network"};
constexpr int kEthernetSlot = kNumPathClasses;  // "ethernet" in override lists

struct Place {
  const std::vector<PciHop>* pci = nullptr;
  Locality loc;
};

Place placeOf(const HostTopo& t, DevRef d) {
  auto check = [&](size_t n, const char* what) {
    COLL_CHECK_ARG(d.index >= 0 && static_cast<size_t>(d.index) < n, "topology: ", what, " index ",
                   d.index, " is out of range (the host has ", n, ")");
  };
  Place p;
  switch (d.kind) {
    case DevKind::Gpu:
      check(t.gpus.size(), "GPU");
      return {&t.gpus[d.index].pciPath, t.gpus[d.index].loc};
    case DevKind::Nic:
      check(t.nics.size(), "NIC");
      return {&t.nics[d.index].pciPath, t.nics[d.index].loc};
    case DevKind::Numa:
      check(t.numas.size(), "NUMA node");
      p.loc = {t.numas[d.index].package, d.index};
      return p;
    case DevKind::Package:
      check(t.packages.size(), "package");
      p.loc.package = d.index;
      return p;
    case DevKind::Host:
      return p;
  }
  return p;
}

PathClass localityClass(const HostTopo& t, Locality a, Locality b) {
  auto fill = [&](Locality& l) {
    if (l.package < 0 && l.numa >= 0 && static_cast<size_t>(l.numa) < t.numas.size())
      l.package = t.numas[l.numa].package;
    if (l.package < 0 && t.detailed && t.packages.size() == 1) l.package = 0;
  };
  fill(a);
  fill(b);
  if (a.numa >= 0 && a.numa == b.numa) return PathClass::Numa;
  // One NUMA node with CPUs in the whole host (memory-only ones aside): any two places
  // share it.
  if (t.detailed && cpuNumaCount(t) == 1) return PathClass::Numa;
  if (a.package >= 0 && a.package == b.package) return PathClass::Package;
  // Different packages, or unknown: assume the worst a host can do.
  return PathClass::CrossSocket;
}

// The package whose memory `place` is (a NUMA node or a package); -1 for anything else.
int memoryPackage(const HostTopo& t, DevRef place) {
  if (place.kind == DevKind::Package) return place.index;
  if (place.kind == DevKind::Numa) return t.numas[place.index].package;
  return -1;
}

// A GPU NVLinked to the CPU whose memory `place` is (POWER8/9): host staging copies
// travel over NVLink, not PCIe. placeOf() has checked both indexes.
bool hostNvlink(const HostTopo& t, DevRef gpu, DevRef place) {
  if (gpu.kind != DevKind::Gpu) return false;
  const GpuInfo& g = t.gpus[gpu.index];
  return g.hostNvlinkGBs > 0 && g.hostNvlinkPackage >= 0 && g.hostNvlinkPackage == memoryPackage(t, place);
}

}  // namespace

const char* pathClassName(PathClass c) {
  int i = static_cast<int>(c);
  return i >= 0 && i < kNumPathClasses ? kClassNames[i] : "invalid";
}

bool parsePathClass(const std::string& text, PathClass* out) {
  for (int i = 0; i < kNumPathClasses; ++i)
    if (text == kClassNames[i]) {
      *out = static_cast<PathClass>(i);
      return true;
    }
  return false;
}

const char* nicKindName(NicKind k) {
  switch (k) {
    case NicKind::Ib: return "ib";
    case NicKind::Roce: return "roce";
    case NicKind::Eth: return "ethernet";
    case NicKind::Opa: return "opa";
    case NicKind::Efa: return "efa";
    case NicKind::Slingshot: return "slingshot";
  }
  return "invalid";
}

// Sources of the defaults are in doc/topology.md ("Assumed link costs").
LinkTable LinkTable::defaults() {
  LinkTable t;
  t.byClass = {{
      {20.0, 0.1},   // self: one memcpy inside a process
      {40.0, 0.7},   // nvlink: two links at 20 GB/s effective each; hwloc's matrix wins
      {24.0, 1.0},   // pci-switch: PCIe 4.0 x16 achieved (31.5 GB/s raw)
      {20.0, 1.1},   // host-bridge: peer traffic turned around in the root complex
      {12.0, 1.2},   // numa: shared-memory copy between processes of one NUMA node
      {10.0, 1.4},   // package: across the socket's internal fabric
      {8.0, 1.7},    // cross-socket: UPI/xGMI as seen by peer traffic
      {12.0, 5.0},   // network: 100 Gb/s RDMA (InfiniBand/RoCE); NIC speed wins
  }};
  t.ethernet = {1.25, 25.0};  // 10 GbE through the kernel's TCP stack
  return t;
}

void LinkTable::applyOverrides(const std::string& list, bool bandwidth, const char* what) {
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    COLL_CHECK_ARG(eq != std::string::npos, what, ": '", item, "' is not class=value");
    std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    int slot = -1;
    PathClass c;
    if (name == "ethernet") slot = kEthernetSlot;
    else if (parsePathClass(name, &c)) slot = static_cast<int>(c);
    COLL_CHECK_ARG(slot >= 0, what, ": unknown path class '", name,
                   "' (known: self, nvlink, pci-switch, host-bridge, numa, package, "
                   "cross-socket, network, ethernet)");
    char* end = nullptr;
    double v = strtod(value.c_str(), &end);
    COLL_CHECK_ARG(!value.empty() && end && *end == 0 && std::isfinite(v) && v > 0, what, ": ",
                   name, "='", value, "' is not a positive number");
    // Beyond these the cost model's estimates overflow to infinity or vanish.
    COLL_CHECK_ARG(v >= 1e-6 && v <= 1e9, what, ": ", name, "='", value, "' is outside [1e-06, 1e+09] ",
                   bandwidth ? "GB/s" : "us");
    LinkCost& cost = slot == kEthernetSlot ? ethernet : byClass[slot];
    (bandwidth ? cost.bwGBs : cost.latUs) = v;
    (bandwidth ? userBw : userLat)[slot] = true;
  }
}

LinkTable LinkTable::fromConfig(const Config& cfg) {
  LinkTable t = defaults();
  t.applyOverrides(cfg.getStr(kTopoLinkBw), true, kTopoLinkBw);
  t.applyOverrides(cfg.getStr(kTopoLinkLat), false, kTopoLinkLat);
  return t;
}

PathClass classify(const HostTopo& topo, DevRef a, DevRef b) {
  Place pa = placeOf(topo, a), pb = placeOf(topo, b);
  if (a.kind == b.kind && a.index == b.index && a.kind != DevKind::Host) return PathClass::Self;
  if (a.kind == DevKind::Gpu && b.kind == DevKind::Gpu && !topo.nvlinkGBs.empty() &&
      topo.nvlinkGBs[a.index][b.index] > 0)
    return PathClass::NVLink;
  if (hostNvlink(topo, a, b) || hostNvlink(topo, b, a)) return PathClass::NVLink;
  if (pa.pci && pb.pci) {
    // Bridges are listed from the host bridge down, so shared ones form a common prefix.
    bool sharedSwitch = false, sharedHostBridge = false;
    for (size_t i = 0; i < pa.pci->size() && i < pb.pci->size(); ++i) {
      if ((*pa.pci)[i].id != (*pb.pci)[i].id) break;
      ((*pa.pci)[i].hostBridge ? sharedHostBridge : sharedSwitch) = true;
    }
    if (sharedSwitch) return PathClass::PciSwitch;
    if (sharedHostBridge) return PathClass::HostBridge;
  }
  return localityClass(topo, pa.loc, pb.loc);
}

uint64_t nicCapacityMbps(const NicInfo& nic) {
  // hwloc's link speed is GB/s of the device's PCIe link (lanes x rate x encoding).
  const uint64_t pcie = nic.pciLinkGBs > 0 ? static_cast<uint64_t>(nic.pciLinkGBs * 8000.0) : 0;
  if (nic.speedMbps && pcie) return std::min(nic.speedMbps, pcie);
  return nic.speedMbps ? nic.speedMbps : pcie;
}

int cpuNumaCount(const HostTopo& topo) {
  return static_cast<int>(std::count_if(topo.numas.begin(), topo.numas.end(),
                                        [](const NumaInfo& n) { return !n.memoryOnly(); }));
}

// Locality comes last among the NIC's qualities, because a host's NICs differ by far more
// than its paths do: a 1 GbE management port on the rank's own NUMA node carries a
// hundredth of the 100-400 Gb/s fabric one socket away. Speeds are often unknown (files
// the library did not write), so RDMA capability and the PCIe link (2 GB/s for a
// management port, 16-63 GB/s for a fabric HCA) stand in for them. Within a factor of two
// NICs count as comparable, and then the closest wins: crossing a socket costs more than
// the faster NIC gains (NCCL too ranks NICs by path before bandwidth).
int chooseNic(const HostTopo& topo, DevRef from, int tieBreak) {
  const int count = static_cast<int>(topo.nics.size());
  if (count == 0) return -1;
  const bool anyFabric = std::any_of(topo.nics.begin(), topo.nics.end(),
                                     [](const NicInfo& n) { return isFabric(n.kind); });
  uint64_t bestCapacity = 0;
  for (const NicInfo& n : topo.nics)
    if (isFabric(n.kind) == anyFabric) bestCapacity = std::max(bestCapacity, nicCapacityMbps(n));
  auto comparable = [&](const NicInfo& n) {
    const uint64_t c = nicCapacityMbps(n);
    return isFabric(n.kind) == anyFabric && (c == 0 || 2 * c >= bestCapacity);
  };
  auto key = [&](int i) {
    return std::make_pair(static_cast<int>(classify(topo, from, DevRef::nic(i))),
                          -static_cast<int64_t>(nicCapacityMbps(topo.nics[i])));
  };
  std::vector<int> best;
  for (int i = 0; i < count; ++i) {
    if (!comparable(topo.nics[i])) continue;
    if (best.empty() || key(i) < key(best[0])) best = {i};
    else if (key(i) == key(best[0])) best.push_back(i);
  }
  const int n = static_cast<int>(best.size());
  return best[((tieBreak % n) + n) % n];
}

Locality localityOfCpus(const HostTopo& topo, const std::vector<int>& cpus) {
  if (cpus.empty() || !topo.detailed) return {};
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  // Memory-only nodes have no CPUs, so they never hold a rank.
  for (size_t i = 0; i < topo.numas.size(); ++i)
    if (!topo.numas[i].memoryOnly() &&
        std::includes(topo.numas[i].cpus.begin(), topo.numas[i].cpus.end(), sorted.begin(), sorted.end()))
      return {topo.numas[i].package, static_cast<int>(i)};
  for (size_t i = 0; i < topo.packages.size(); ++i)
    if (std::includes(topo.packages[i].cpus.begin(), topo.packages[i].cpus.end(), sorted.begin(),
                      sorted.end()))
      return {static_cast<int>(i), -1};
  return {};
}

}  // namespace coll
