// NUMA nodes from hwloc: which CPUs each node serves, which nodes are memory only, where
// those sit, and which node an IO device is local to.
//
// hwloc hangs NUMA nodes as memory children off the object whose CPUs are close to them,
// and gives every node its parent's cpuset. Where that object holds several nodes (DDR and
// HBM in flat mode on Xeon Max and KNL, the GPU memory of POWER9) or a node hangs off the
// whole machine (a CXL expander), the cpusets and nodesets stop telling which node is a
// CPU's memory: each node seems to hold the parent's CPUs, and every object above a device
// "contains" several nodes. So a CPU's own node is found from the tree instead: the first
// memory child of its closest ancestor that has any, skipping special memory (HBM, MCDRAM,
// GPU memory, NVM, CXL) where hwloc names it by subtype, here or further up; without
// subtypes (hwloc before 2.8 on Xeon Max) the first listed, which hwloc orders by OS
// index, DDR first. Nodes that are no CPU's own are memory only.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>

#include "topology/hwloc_internal.hpp"

namespace coll {
namespace {

// Every subtype hwloc gives but "DRAM" names memory a CPU does not default to: HBM,
// MCDRAM, GPUMemory, NVM, SPM, CXL-DRAM, CXL-NVM.
bool specialMemory(hwloc_obj_t node) { return node->subtype && strcmp(node->subtype, "DRAM") != 0; }

// The NUMA node holding the local memory of `o`'s CPUs; null when `o` has no memory child.
hwloc_obj_t ownNode(hwloc_obj_t o) {
  hwloc_obj_t first = nullptr;
  for (hwloc_obj_t m = o->memory_first_child; m; m = m->next_sibling) {
    hwloc_obj_t n = m;
    while (n && n->type != HWLOC_OBJ_NUMANODE) n = n->memory_first_child;  // below memory-side caches
    if (!n) continue;
    if (!specialMemory(n)) return n;
    if (!first) first = n;
  }
  return first;
}

// The package of memory-only node `node` (an index into h.numas) that hangs off the whole
// machine: that of the nodes with CPUs nearest to it in hwloc's NUMALatency matrix
// (firmware's SLIT), where those all lie in one package; -1 otherwise.
int nearestPackage(hwloc_topology_t t, const HostTopo& h, size_t node) {
  unsigned nr = 1;
  hwloc_distances_s* d = nullptr;
  if (hwloc_distances_get_by_name(t, "NUMALatency", &nr, &d, 0) != 0 || nr == 0 || !d) return -1;
  std::map<int, size_t> byOs;
  for (size_t i = 0; i < h.numas.size(); ++i) byOs[h.numas[i].osIndex] = i;
  auto indexOf = [&](hwloc_obj_t o) {
    auto it = o && o->type == HWLOC_OBJ_NUMANODE ? byOs.find(static_cast<int>(o->os_index)) : byOs.end();
    return it == byOs.end() ? SIZE_MAX : it->second;
  };
  const unsigned n = d->nbobjs;
  unsigned self = n;
  for (unsigned i = 0; i < n; ++i)
    if (indexOf(d->objs[i]) == node) self = i;
  uint64_t best = UINT64_MAX;
  int package = -1;
  bool oneBest = false;
  for (unsigned j = 0; j < n && self < n; ++j) {
    const size_t k = indexOf(d->objs[j]);
    if (j == self || k == SIZE_MAX || h.numas[k].memoryOnly()) continue;
    const uint64_t v = d->values[self * n + j];
    if (v < best) {
      best = v;
      package = h.numas[k].package;
      oneBest = true;
    } else if (v == best && h.numas[k].package != package) {
      oneBest = false;
    }
  }
  hwloc_distances_release(t, d);
  return oneBest ? package : -1;
}

}  // namespace

void numaParts(hwloc_topology_t t, HostTopo& h) {
  std::map<unsigned, size_t> byOs;
  const int count = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < count; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    NumaInfo n;
    n.osIndex = static_cast<int>(o->os_index);
    n.package = packageOfSet(t, o->cpuset);  // its parent's CPUs, for memory-only nodes too
    n.memBytes = o->attr->numanode.local_memory;
    n.kind = o->subtype ? o->subtype : "";
    const char* gpu = hwloc_obj_get_info_by_name(o, "PCIBusID");
    if (n.kind == "GPUMemory" && gpu) n.gpuBusId = gpu;
    byOs[o->os_index] = h.numas.size();
    h.numas.push_back(n);
  }
  for (hwloc_obj_t pu = nullptr; (pu = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, pu));) {
    // The nearest ordinary memory, else the nearest special one (a host of HBM only).
    hwloc_obj_t node = nullptr, special = nullptr;
    for (hwloc_obj_t a = pu->parent; a && !node; a = a->parent) {
      hwloc_obj_t n = ownNode(a);
      if (n && !specialMemory(n)) node = n;
      else if (n && !special) special = n;
    }
    if (!node) node = special;
    auto it = node ? byOs.find(node->os_index) : byOs.end();
    if (it != byOs.end()) h.numas[it->second].cpus.push_back(static_cast<int>(pu->os_index));
  }
  for (size_t i = 0; i < h.numas.size(); ++i) {
    NumaInfo& n = h.numas[i];
    std::sort(n.cpus.begin(), n.cpus.end());
    if (n.memoryOnly() && n.package < 0) n.package = nearestPackage(t, h, i);
  }
}

Locality ioLocality(hwloc_topology_t t, const HostTopo& h, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, obj);
  Locality l;
  if (!anc || !anc->cpuset) return l;
  l.package = packageOfSet(t, anc->cpuset);
  // The node whose CPUs hold all the CPUs the device is close to: none when it sits above
  // several (a device of a whole package split into NUMA nodes, or of the machine).
  const std::vector<int> cpus = cpusOf(anc->cpuset);
  for (size_t i = 0; i < h.numas.size() && !cpus.empty(); ++i) {
    const NumaInfo& n = h.numas[i];
    if (n.memoryOnly() || !std::includes(n.cpus.begin(), n.cpus.end(), cpus.begin(), cpus.end())) continue;
    l.numa = static_cast<int>(i);
    if (l.package < 0) l.package = n.package;
    break;
  }
  return l;
}

}  // namespace coll
