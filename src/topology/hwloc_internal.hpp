// Shared by the hwloc-based files of src/topology (built only when hwloc is found).
#pragma once

#include <hwloc.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "topology/topology.hpp"

namespace coll {

// The number in an enum field of an object's attributes (a bridge's, an OS device's or a
// cache's type). hwloc's XML reader stores whatever number a file gives there, and
// reading an enum beyond its enumerators is undefined: compare the raw number instead.
template <class E>
unsigned rawEnum(const E& field) {
  static_assert(std::is_enum_v<E>);
  std::underlying_type_t<E> v;
  std::memcpy(&v, &field, sizeof v);
  return static_cast<unsigned>(v);
}

// Infos this library adds to OS devices of the live machine before a dump, so that a
// dumped topology keeps what hwloc itself does not record (read from sysfs).
constexpr const char* kSpeedInfo = "LinkSpeedMbps";   // NIC port speed in Mb/s
constexpr const char* kLinkLayerInfo = "LinkLayer";   // "InfiniBand" or "Ethernet" (verbs devices)
// The largest kSpeedInfo a file may give (1 Pb/s); sysfs values above it are not recorded.
constexpr uint64_t kMaxSpeedMbps = 1000000000;

HostTopo extractHostTopo(hwloc_topology_t t, const std::string& source);

// Pieces of the extraction, each in its own file.
std::vector<int> cpusOf(hwloc_const_bitmap_t set);            // sorted bit indexes
std::string busIdOf(hwloc_obj_t pci);                         // "0000:19:00.0"
int packageOfSet(hwloc_topology_t t, hwloc_const_cpuset_t set);  // the package holding `set`; -1 none
// h.numas: every node's own CPUs, memory-only nodes placed (hwloc_numa.cpp).
void numaParts(hwloc_topology_t t, HostTopo& h);
// The NUMA node and package an IO object is local to (hwloc_numa.cpp); needs h.numas.
Locality ioLocality(hwloc_topology_t t, const HostTopo& h, hwloc_obj_t obj);
// NVLink bandwidth between h.gpus and from them to CPUs (hwloc_nvlink.cpp); needs h.gpus.
void nvlinkParts(hwloc_topology_t t, HostTopo& h);

}  // namespace coll
