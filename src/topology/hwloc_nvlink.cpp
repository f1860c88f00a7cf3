// hwloc's NVLinkBandwidth matrix -> NVLink bandwidth between GPUs, and from GPUs to CPUs.
//
// hwloc's NVML backend lists every GPU (its NVML OS device) and the other ends of its
// links: NVSwitch ports (PCI devices of subtype NVSwitch) on HGX/DGX boards, the CPU on
// POWER8/9 (the object holding the GPU's CPUs, usually its Package). Values are MB/s
// (20 or 25 GB/s per link and direction, summed per pair), with a high artificial value
// on the diagonal. Two GPUs are joined directly (their own entry) and through the switches,
// which one NVLink fabric joins: there the pair gets the lesser of the two GPUs' summed
// bandwidth to all switches, as hwloc's MERGE_SWITCH_PORTS and TRANSITIVE_CLOSURE
// transforms compute. Those transforms are not used: without a switch the closure sets
// every GPU pair to zero, which lost the NVLinks of POWER nodes (and any direct
// GPU-GPU link beside a switch).
#include <algorithm>
#include <cstring>
#include <map>

#include "topology/hwloc_internal.hpp"

namespace coll {
namespace {

enum class EndKind { Other, Gpu, Switch, Cpu };
struct End {
  EndKind kind = EndKind::Other;
  int index = -1;  // GPU index for Gpu, package for Cpu (-1: the whole machine)
};

End endOf(hwloc_topology_t t, const std::map<std::string, int>& gpuByBus, hwloc_obj_t o) {
  if (!o) return {};
  if (o->subtype && strcmp(o->subtype, "NVSwitch") == 0) return {EndKind::Switch, -1};
  hwloc_obj_t pci = o->type == HWLOC_OBJ_PCI_DEVICE ? o : nullptr;
  if (o->type == HWLOC_OBJ_OS_DEVICE && o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE) pci = o->parent;
  if (pci) {
    auto it = gpuByBus.find(busIdOf(pci));
    if (it != gpuByBus.end()) return {EndKind::Gpu, it->second};
    // An NVIDIA bridge-class function (0680) is an NVSwitch that lost its subtype.
    const auto& a = pci->attr->pcidev;
    return a.vendor_id == 0x10de && a.class_id >> 8 == 0x06 ? End{EndKind::Switch, -1} : End{};
  }
  if (o->cpuset && !hwloc_bitmap_iszero(o->cpuset)) return {EndKind::Cpu, packageOfSet(t, o->cpuset)};
  return {};
}

}  // namespace

void nvlinkParts(hwloc_topology_t t, HostTopo& h) {
  unsigned nr = 1;
  hwloc_distances_s* d = nullptr;
  if (h.gpus.empty() || hwloc_distances_get_by_name(t, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0 || !d)
    return;
  std::map<std::string, int> gpuByBus;
  for (size_t i = 0; i < h.gpus.size(); ++i) gpuByBus[h.gpus[i].busId] = static_cast<int>(i);
  const unsigned n = d->nbobjs;
  std::vector<End> ends(n);
  for (unsigned i = 0; i < n; ++i) ends[i] = endOf(t, gpuByBus, d->objs[i]);
  // GB/s between objects i and j; hwloc stores both directions, take the larger.
  auto gbs = [&](unsigned i, unsigned j) {
    return static_cast<double>(std::max(d->values[i * n + j], d->values[j * n + i])) / 1000.0;
  };
  const size_t ngpus = h.gpus.size();
  h.nvlinkGBs.assign(ngpus, std::vector<double>(ngpus, 0.0));
  std::vector<double> toSwitches(ngpus, 0.0);
  std::vector<std::map<int, double>> toCpus(ngpus);
  for (unsigned i = 0; i < n; ++i) {
    if (ends[i].kind != EndKind::Gpu) continue;
    const int g = ends[i].index;
    for (unsigned j = 0; j < n; ++j) {
      if (j == i) continue;
      const End& e = ends[j];
      if (e.kind == EndKind::Gpu && e.index != g) h.nvlinkGBs[g][e.index] = std::max(h.nvlinkGBs[g][e.index], gbs(i, j));
      if (e.kind == EndKind::Switch) toSwitches[g] += gbs(i, j);
      if (e.kind == EndKind::Cpu) toCpus[g][e.index] += gbs(i, j);
    }
  }
  hwloc_distances_release(t, d);
  for (size_t a = 0; a < ngpus; ++a) {
    for (size_t b = 0; b < ngpus; ++b)
      if (a != b) h.nvlinkGBs[a][b] += std::min(toSwitches[a], toSwitches[b]);
    for (const auto& [package, bw] : toCpus[a])
      if (bw > h.gpus[a].hostNvlinkGBs) {
        h.gpus[a].hostNvlinkGBs = bw;
        h.gpus[a].hostNvlinkPackage = package;
      }
  }
}

}  // namespace coll
