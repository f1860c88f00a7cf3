// How data travels between two devices or two ranks, coarsest to finest, in the spirit
// of NCCL's path types (LOC, NVL, PIX/PXB, PHB, SYS, NET), and what each kind of path is
// assumed to deliver. The numbers are planning assumptions for the cost model, not
// measurements; doc/topology.md gives their sources, COLL_TOPO_LINK_BW/_LAT override them.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace coll {

class Config;

// Ordered from closest to farthest: a smaller value is always at least as good a path.
enum class PathClass : uint8_t {
  Self = 0,         // the same device (or the same rank)
  NVLink = 1,       // GPUs joined by NVLink (direct or through an NVSwitch)
  PciSwitch = 2,    // below a common PCIe switch or root port (NCCL PIX/PXB)
  HostBridge = 3,   // common PCIe host bridge (root complex), different root ports (PHB)
  Numa = 4,         // same NUMA node, different host bridges (or CPU memory on one node)
  Package = 5,      // same socket, different NUMA nodes (sub-NUMA clustering, NPS2/4)
  CrossSocket = 6,  // across the inter-socket link (UPI/xGMI; NCCL SYS)
  Network = 7,      // different hosts
};
constexpr int kNumPathClasses = 8;

// How a rank's messages to other hosts travel, known once its transports are chosen
// (JobTopo::setNetPaths): through the kernel's TCP stack, or by kernel-bypass RDMA (the
// built-in InfiniBand verbs backend). Unknown before then, and for network plugins,
// which do not say.
enum class NetPath : uint8_t { Unknown = 0, Kernel = 1, Bypass = 2 };

// "self", "nvlink", "pci-switch", "host-bridge", "numa", "package", "cross-socket", "network".
const char* pathClassName(PathClass c);
// Accepts the names above; false if unknown.
bool parsePathClass(const std::string& text, PathClass* out);

struct LinkCost {
  double bwGBs = 0;   // assumed point-to-point bandwidth, GB/s (1e9 bytes per second)
  double latUs = 0;   // assumed one-way latency of a small message, microseconds
};

// Assumed cost per path class. Network paths have two entries: RDMA NICs (InfiniBand,
// RoCE) and plain Ethernet (TCP), whose latency differs by an order of magnitude.
struct LinkTable {
  std::array<LinkCost, kNumPathClasses> byClass{};
  LinkCost ethernet{};
  // Which entries the user set (COLL_TOPO_LINK_BW/_LAT): those win over per-pair
  // figures found in the topology (NVLink bandwidth, NIC speed).
  std::array<bool, kNumPathClasses + 1> userBw{};
  std::array<bool, kNumPathClasses + 1> userLat{};

  static LinkTable defaults();
  // Defaults with COLL_TOPO_LINK_BW / COLL_TOPO_LINK_LAT applied, e.g.
  // "nvlink=40,network=25,ethernet=3". Throws collInvalidArgument on a bad list.
  static LinkTable fromConfig(const Config& cfg);
  // Applies one override list; `what` names the variable in error messages.
  void applyOverrides(const std::string& list, bool bandwidth, const char* what);

  const LinkCost& of(PathClass c) const { return byClass[static_cast<int>(c)]; }
};

}  // namespace coll
