// hwloc objects -> HostTopo. Only the hwloc_*.cpp files of src/topology see hwloc's API.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "base/error.hpp"
#include "topology/hwloc_internal.hpp"

namespace coll {
namespace {

std::string busIdText(unsigned domain, unsigned bus, unsigned dev, unsigned fn) {
  char buf[32];
  snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
  return buf;
}

std::string infoOf(hwloc_obj_t o, const char* name) {
  const char* v = o ? hwloc_obj_get_info_by_name(o, name) : nullptr;
  return v ? v : "";
}

}  // namespace

std::vector<int> cpusOf(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (!set) return out;
  unsigned i;
  hwloc_bitmap_foreach_begin(i, set) { out.push_back(static_cast<int>(i)); }
  hwloc_bitmap_foreach_end();
  return out;
}

std::string busIdOf(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return busIdText(a.domain, a.bus, a.dev, a.func);
}

int packageOfSet(hwloc_topology_t t, hwloc_const_cpuset_t set) {
  int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  if (n <= 1) return 0;  // one package (or none reported): everything is on it
  for (int i = 0; i < n; ++i)
    if (hwloc_bitmap_isincluded(set, hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, i)->cpuset)) return i;
  return -1;
}

namespace {

// Bridges from the host bridge down to the device's parent.
std::vector<PciHop> pciPathOf(hwloc_obj_t dev) {
  std::vector<PciHop> path;
  for (hwloc_obj_t o = dev->parent; o && o->type == HWLOC_OBJ_BRIDGE; o = o->parent) {
    const auto& b = o->attr->bridge;
    PciHop hop;
    hop.id = o->gp_index;
    hop.hostBridge = rawEnum(b.upstream_type) == HWLOC_OBJ_BRIDGE_HOST;
    if (hop.hostBridge) {
      char buf[48];
      snprintf(buf, sizeof buf, "hostbridge %04x:[%02x-%02x]", b.downstream.pci.domain,
               b.downstream.pci.secondary_bus, b.downstream.pci.subordinate_bus);
      hop.label = buf;
    } else {
      hop.label = busIdText(b.upstream.pci.domain, b.upstream.pci.bus, b.upstream.pci.dev, b.upstream.pci.func);
    }
    path.push_back(hop);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

void cpuParts(hwloc_topology_t t, HostTopo& h) {
  int npkg = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  for (int i = 0; i < std::max(npkg, 1); ++i) {
    // A platform that reports no package gets one covering the machine.
    hwloc_obj_t o = npkg ? hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, i) : hwloc_get_root_obj(t);
    PackageInfo p;
    p.osIndex = npkg ? static_cast<int>(o->os_index) : -1;
    p.cpus = cpusOf(o->cpuset);
    p.cores = hwloc_get_nbobjs_inside_cpuset_by_type(t, o->cpuset, HWLOC_OBJ_CORE);
    p.model = infoOf(o, "CPUModel");
    h.packages.push_back(p);
  }
  numaParts(t, h);
  h.cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  h.pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  for (hwloc_obj_type_t type : {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE,
                                HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE}) {
    int n = hwloc_get_nbobjs_by_type(t, type);
    if (n <= 0) continue;
    hwloc_obj_t o = hwloc_get_obj_by_type(t, type, 0);
    const auto& c = o->attr->cache;
    const unsigned ct = rawEnum(c.type);
    const char* kind = ct == HWLOC_OBJ_CACHE_DATA ? "data" : ct == HWLOC_OBJ_CACHE_INSTRUCTION ? "instruction" : "unified";
    h.caches.push_back({static_cast<int>(c.depth), kind, c.size, n});
  }
}

struct PciChildren {
  std::string cuda, nvml, openfabrics, model;
  std::vector<hwloc_obj_t> netdevs;
  hwloc_obj_t ofObj = nullptr;
  bool slingshot = false;  // an OS device of subtype Slingshot (HPE Cray Cassini)
};

PciChildren scanChildren(hwloc_obj_t pci) {
  PciChildren c;
  for (hwloc_obj_t o = pci->io_first_child; o; o = o->next_sibling) {
    if (o->type != HWLOC_OBJ_OS_DEVICE) continue;
    std::string sub = o->subtype ? o->subtype : "";
    const unsigned type = rawEnum(o->attr->osdev.type);
    if (type == HWLOC_OBJ_OSDEV_COPROC && sub == "CUDA") c.cuda = o->name;
    if (type == HWLOC_OBJ_OSDEV_GPU && sub == "NVML") c.nvml = o->name;
    if ((type == HWLOC_OBJ_OSDEV_COPROC || type == HWLOC_OBJ_OSDEV_GPU) && c.model.empty())
      c.model = infoOf(o, "GPUModel");
    if (type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      c.openfabrics = o->name;
      c.ofObj = o;
    }
    if (type == HWLOC_OBJ_OSDEV_NETWORK) c.netdevs.push_back(o);
    if (sub == "Slingshot") c.slingshot = true;
  }
  return c;
}

bool startsWith(const char* name, const char* prefix) { return name && strncmp(name, prefix, strlen(prefix)) == 0; }

// What kind of network a PCI function is. Omni-Path, EFA and Slingshot are told by vendor,
// device or driver first: Omni-Path reports the InfiniBand link layer, EFA and Cassini
// PCI class 0200 (Ethernet). Then a verbs device's link layer where the live machine
// recorded it; else its PCI class: ConnectX reports 0207 in InfiniBand mode, 0200 in
// Ethernet mode (RoCE).
NicKind nicKindOf(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a, const PciChildren& c) {
  if (a.vendor_id == 0x1d0f && (a.device_id & 0xfff0) == 0xefa0) return NicKind::Efa;  // Amazon efa0-efa3
  if (c.slingshot || a.vendor_id == 0x17db) return NicKind::Slingshot;                 // Cray Cassini
  if (startsWith(c.openfabrics.c_str(), "hfi1") || (a.vendor_id == 0x8086 && a.class_id == 0x0208))
    return NicKind::Opa;  // the hfi1 driver; Intel's class 0208 "fabric controller"
  if (!c.ofObj) return NicKind::Eth;
  const std::string layer = infoOf(c.ofObj, kLinkLayerInfo);
  if (layer == "InfiniBand") return NicKind::Ib;
  if (layer == "Ethernet") return NicKind::Roce;
  return a.class_id == 0x0207 ? NicKind::Ib : NicKind::Roce;
}

// Mb/s; 0 unknown. Digits only: strtoull would take "-1" and an overflow as 2^64-1.
uint64_t speedInfo(const HostTopo& h, hwloc_obj_t o) {
  const char* v = hwloc_obj_get_info_by_name(o, kSpeedInfo);
  if (!v) return 0;
  uint64_t mbps = 0;
  bool ok = *v != 0;
  for (const char* c = v; ok && *c; ++c) {
    ok = *c >= '0' && *c <= '9';
    mbps = mbps * 10 + static_cast<uint64_t>(*c - '0');
    ok = ok && mbps <= kMaxSpeedMbps;
  }
  COLL_CHECK_ARG(ok, "topology from ", h.source, ": NIC ", o->name ? o->name : "?", " has ", kSpeedInfo, " '", v,
                 "'; it must be the port speed in Mb/s, a whole number up to ", kMaxSpeedMbps);
  return mbps;
}

void ioParts(hwloc_topology_t t, HostTopo& h) {
  for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(t, pci));) {
    const auto& a = pci->attr->pcidev;
    PciChildren c = scanChildren(pci);
    bool nvidiaDisplay = a.vendor_id == 0x10de && (a.class_id == 0x0302 || a.class_id == 0x0300);
    if (nvidiaDisplay || !c.cuda.empty() || !c.nvml.empty()) {
      GpuInfo g;
      g.busId = busIdOf(pci);
      g.name = !c.cuda.empty() ? c.cuda : c.nvml;
      g.model = !c.model.empty() ? c.model : infoOf(pci, "PCIDevice");
      g.loc = ioLocality(t, h, pci);
      g.pciPath = pciPathOf(pci);
      g.pciLinkGBs = a.linkspeed;
      h.gpus.push_back(g);
      continue;
    }
    NicInfo n;
    n.busId = busIdOf(pci);
    n.loc = ioLocality(t, h, pci);
    n.pciPath = pciPathOf(pci);
    n.pciLinkGBs = a.linkspeed;
    n.kind = nicKindOf(a, c);
    if (c.ofObj) {  // a verbs device: named as the verbs API names it
      n.name = c.openfabrics;
      n.netdev = c.netdevs.empty() ? "" : c.netdevs[0]->name;
      n.speedMbps = speedInfo(h, c.ofObj);
      h.nics.push_back(n);
      continue;
    }
    if (n.kind == NicKind::Slingshot && !c.netdevs.empty()) {
      // One NIC with two OS devices: cxi0 (libfabric's cxi provider) and the hsn0 interface.
      for (hwloc_obj_t nd : c.netdevs) {
        const bool cxi = startsWith(nd->name, "cxi");
        if (cxi && n.name.empty()) n.name = nd->name;
        if (!cxi && n.netdev.empty()) {
          n.netdev = nd->name;
          n.speedMbps = speedInfo(h, nd);  // sysfs knows the interface's speed
        }
      }
      if (n.name.empty()) n.name = n.netdev;
      h.nics.push_back(n);
      continue;
    }
    for (hwloc_obj_t nd : c.netdevs) {
      n.name = n.netdev = nd->name;
      n.speedMbps = speedInfo(h, nd);
      h.nics.push_back(n);
    }
  }
  auto byBus = [](const auto& x, const auto& y) { return x.busId < y.busId; };
  std::stable_sort(h.gpus.begin(), h.gpus.end(), byBus);
  std::stable_sort(h.nics.begin(), h.nics.end(), byBus);
  // A bus id names one GPU (CUDA device lookup, the NVLink matrix); NICs may share one
  // (several ports of a PCI function).
  for (size_t i = 1; i < h.gpus.size(); ++i)
    COLL_CHECK_ARG(h.gpus[i].busId != h.gpus[i - 1].busId, "topology from ", h.source, ": GPUs ", i - 1, " and ",
                   i, " have the same PCI bus id ", h.gpus[i].busId);
}

}  // namespace

HostTopo extractHostTopo(hwloc_topology_t t, const std::string& source) {
  HostTopo h;
  h.detailed = true;
  h.source = source;
  h.hostname = infoOf(hwloc_get_root_obj(t), "HostName");
  cpuParts(t, h);
  ioParts(t, h);
  nvlinkParts(t, h);
  for (size_t i = 0; i < h.gpus.size(); ++i)
    h.gpus[i].closestNic = chooseNic(h, DevRef::gpu(static_cast<int>(i)), 0);
  return h;
}

}  // namespace coll
