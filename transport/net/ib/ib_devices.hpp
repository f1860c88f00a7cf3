// Which InfiniBand / RoCE ports the backend can use: device discovery, the COLL_IB_HCA
// filter, GID choice for RoCE, link speed. Pure helpers are separate for unit tests.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "transport/net/ib/verbs_ops.hpp"

namespace coll::net::ib {

class DeviceMemory;

// A device context and protection domain, shared by every endpoint on its ports (and
// kept alive by them, so finalize() with endpoints still open is safe).
struct Device {
  const VerbsOps* ops = nullptr;
  std::string name;  // "mlx5_0"
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  // Endpoints on this device may be driven from different threads: creating and
  // destroying their verbs objects on the shared context and PD is serialised here.
  std::mutex mu;
  // Registrations of user buffers (ib_mem.hpp); set up by the backend's init.
  std::unique_ptr<DeviceMemory> mem;
  Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();
};

struct Port {
  std::shared_ptr<Device> dev;
  uint8_t num = 0;
  std::string name;     // "mlx5_0:1"
  std::string pciPath;  // "0000:3b:00.0" or ""
  // The device's place in the PCI tree, "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"
  // or "": ports under the same bridges are as close to a rank as each other.
  std::string pciTree;
  uint8_t linkLayer = IBV_LINK_LAYER_INFINIBAND;
  uint16_t lid = 0;
  int gidIndex = -1;  // RoCE: the source GID; InfiniBand: -1 (LID addressing)
  ibv_gid gid{};
  ibv_mtu mtu = IBV_MTU_1024;
  int speedMbps = 0;
  bool roce() const { return linkLayer == IBV_LINK_LAYER_ETHERNET; }
};

// COLL_IB_HCA: "mlx5_0:1,mlx5_1" keeps port 1 of mlx5_0 and every port of mlx5_1;
// a leading '^' keeps everything except the list. Names match exactly.
struct HcaFilter {
  bool exclude = false;
  std::vector<std::pair<std::string, int>> entries;  // port 0: every port
  bool empty() const { return entries.empty(); }
  bool keeps(const std::string& dev, int port) const;
  bool names(const std::string& dev) const;  // some entry names this device
};
// Throws collInvalidArgument on a malformed entry.
HcaFilter parseHcaFilter(const std::string& text);

// Link speed in Mb/s from ibv_port_attr's active_speed and active_width (0: unknown).
int portSpeedMbps(uint8_t activeSpeed, uint8_t activeWidth);

const char* portStateName(int state);

// The RoCE GID to use. `wanted` >= 0 is COLL_IB_GID_INDEX (checked, must not be empty);
// otherwise the best entry: RoCE v2 over v1, IPv4-mapped over other addresses (those
// route across subnets), then the lowest index. Returns -1 with *why set when none.
int pickGid(const VerbsOps& ops, ibv_context* ctx, uint8_t port, int tableLen, int wanted,
            ibv_gid* gid, std::string* why);

// The ports a connection on ports[first] spreads over when it may use `n` (COLL_IB_PORTS):
// ports[first] itself, then the other ports of its device, then those of other devices
// closest in the PCI tree (most bridges in common, so of the same path class to the
// rank), lowest index first among equals. Only ports of first's link layer qualify
// (queue pairs of one connection pair with ports of one kind at the peer). Returns
// fewer than n when there are not enough.
std::vector<size_t> portsNear(const std::vector<Port>& ports, size_t first, size_t n);

struct DiscoverOptions {
  std::string hca;    // COLL_IB_HCA
  int gidIndex = -1;  // COLL_IB_GID_INDEX
};
// Every ACTIVE port that passes the filter, in device then port order. Throws
// coll::Error saying why when there is none.
std::vector<Port> discoverPorts(const VerbsOps& ops, const DiscoverOptions& opt);

}  // namespace coll::net::ib
