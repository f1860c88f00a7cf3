// The network interface a rank's inter-host traffic leaves through, and how fast it
// really is: the link speed the kernel reports, lowered to the rate of a token-bucket
// shaper (tc tbf) on the interface when one is installed. hwloc lists only PCI NICs, so
// for virtual interfaces (veth, bridges, VPNs) this is the only speed the cost model gets.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace coll {

struct LocalNet {
  std::string name;         // interface name; empty when unknown
  uint64_t speedMbps = 0;   // effective egress speed; 0 unknown
  uint64_t linkMbps = 0;    // /sys/class/net/<name>/speed; 0 unknown
  uint64_t shapedMbps = 0;  // lowest tbf rate on the interface; 0 none
};

// The interface that holds address `addr` (port ignored); empty when none does.
std::string interfaceOfAddress(const sockaddr_storage& addr);
// /sys/class/net/<ifname>/speed in Mb/s; 0 when unknown (virtual links report -1 or nothing).
uint64_t linkSpeedMbps(const std::string& ifname);
// The lowest rate of the tbf qdiscs on the interface, read over rtnetlink, in Mb/s; 0 when
// there is none or the kernel does not answer within a second.
uint64_t shapedRateMbps(const std::string& ifname);
// The interface whose address is `addr`, with its speeds filled in.
LocalNet describeLocalNet(const sockaddr_storage& addr);

// Exposed for tests: the rate (bytes/s) of one RTM_NEWQDISC message for interface index
// ifindex, 0 if the message is for another interface or not a tbf with a rate.
uint64_t tbfRateOfMessage(const void* nlmsg, size_t len, int ifindex);

}  // namespace coll
