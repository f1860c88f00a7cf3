// Path classification inside one host, NIC choice, and the assumed cost of each class.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <tuple>

#include "core/config.hpp"
#include "core/error.hpp"
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
  // One NUMA node in the whole host: any two places share it.
  if (t.detailed && t.numas.size() == 1) return PathClass::Numa;
  if (a.package >= 0 && a.package == b.package) return PathClass::Package;
  // Different packages, or unknown: assume the worst a host can do.
  return PathClass::CrossSocket;
}

int kindRank(NicKind k) { return k == NicKind::Eth ? 1 : 0; }

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
    case NicKind::Eth: return "eth";
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

int chooseNic(const HostTopo& topo, DevRef from, int tieBreak) {
  if (topo.nics.empty()) return -1;
  auto key = [&](int i) {
    const NicInfo& n = topo.nics[i];
    return std::make_tuple(static_cast<int>(classify(topo, from, DevRef::nic(i))),
                           -static_cast<int64_t>(n.speedMbps), kindRank(n.kind));
  };
  std::vector<int> best{0};
  for (int i = 1; i < static_cast<int>(topo.nics.size()); ++i) {
    if (key(i) < key(best[0])) best = {i};
    else if (key(i) == key(best[0])) best.push_back(i);
  }
  int n = static_cast<int>(best.size());
  return best[((tieBreak % n) + n) % n];
}

Locality localityOfCpus(const HostTopo& topo, const std::vector<int>& cpus) {
  if (cpus.empty() || !topo.detailed) return {};
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < topo.numas.size(); ++i)
    if (std::includes(topo.numas[i].cpus.begin(), topo.numas[i].cpus.end(), sorted.begin(), sorted.end()))
      return {topo.numas[i].package, static_cast<int>(i)};
  for (size_t i = 0; i < topo.packages.size(); ++i)
    if (std::includes(topo.packages[i].cpus.begin(), topo.packages[i].cpus.end(), sorted.begin(),
                      sorted.end()))
      return {static_cast<int>(i), -1};
  return {};
}

}  // namespace coll
