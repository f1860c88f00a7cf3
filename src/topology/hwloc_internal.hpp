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

HostTopo extractHostTopo(hwloc_topology_t t, const std::string& source);

}  // namespace coll
