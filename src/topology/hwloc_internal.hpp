// Shared by the hwloc-based files of src/topology (built only when hwloc is found).
#pragma once

#include <hwloc.h>

#include <string>

#include "topology/topology.hpp"

namespace coll {

// Infos this library adds to OS devices of the live machine before a dump, so that a
// dumped topology keeps what hwloc itself does not record (read from sysfs).
constexpr const char* kSpeedInfo = "LinkSpeedMbps";   // NIC port speed in Mb/s
constexpr const char* kLinkLayerInfo = "LinkLayer";   // "InfiniBand" or "Ethernet" (verbs devices)
// The largest kSpeedInfo a file may give (1 Pb/s); sysfs values above it are not recorded.
constexpr uint64_t kMaxSpeedMbps = 1000000000;

HostTopo extractHostTopo(hwloc_topology_t t, const std::string& source);

}  // namespace coll
