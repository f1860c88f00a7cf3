// The job's topology: which ranks share a host, who leads each host, how every pair of
// ranks is connected and in which order a ring should visit the ranks.
//
// Every rank describes itself in a fixed-size RankPlacement (host identity, where its
// CPUs, GPU and NIC sit on its host) and the ranks all-gather them. Everything below is a
// pure function of that vector, so every rank computes the same groups, leaders and
// orders without further communication.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "topology/path.hpp"
#include "topology/topology.hpp"

namespace coll {

constexpr uint32_t kPlacementMagic = 0x54504c33u;  // "TPL3": layout version of the struct (and of NicKind)
constexpr int kPlacementMaxGpus = 16;              // GPUs per host a placement can describe
constexpr uint8_t kNoPath = 0xff;

struct RankPlacement {
  uint32_t magic = kPlacementMagic;
  int32_t rank = -1;
  char hostId[256] = {};   // COLL_HOST_ID or hostname + boot id; NUL-terminated
  char hostname[64] = {};  // for display only
  int32_t pid = 0;
  // Where the rank's CPUs are (from its affinity mask); -1 unknown or spanning several.
  int16_t package = -1;
  int16_t numa = -1;
  int16_t hostPackages = 0;  // the host's package / NUMA counts; 0 unknown
  int16_t hostNumas = 0;
  int32_t firstCpu = -1;     // lowest CPU it may run on
  // Its GPU, if any: index on the host, PCI bus id, locality, path class to every GPU of
  // the host and NVLink bandwidth to each (GB/s, 0 none).
  int16_t gpu = -1;
  int16_t gpuPackage = -1;
  int16_t gpuNuma = -1;
  uint8_t hostGpus = 0;
  uint8_t pad0 = 0;
  char gpuBusId[16] = {};
  uint8_t gpuPath[kPlacementMaxGpus] = {};
  float gpuNvlinkGBs[kPlacementMaxGpus] = {};
  // The NIC it uses for inter-host traffic, if any.
  int16_t nic = -1;
  uint8_t nicKind = 0;   // NicKind
  uint8_t nicPath = kNoPath;  // PathClass from the rank (its GPU, else its CPUs) to the NIC
  uint32_t cpus = 0;  // CPUs the rank may run on (its affinity mask); 0 unknown
  uint64_t nicSpeedMbps = 0;
  char nicName[32] = {};
  // Hash of the running kernel's boot id: ranks with equal values share CPUs even when
  // COLL_HOST_ID (or network namespaces) make them different hosts. 0 unknown.
  uint64_t kernelId = 0;
  // The smallest round trip the kernel measured on the rank's bootstrap connection to the
  // rendezvous root (rank 0's process), microseconds; 0 unknown. Half of it, on a rank
  // of another host than rank 0, is how long the network takes to cross one way.
  float rootRttUs = 0;
  // NetPath; set locally after the exchange (always Unknown on the wire).
  uint8_t netPath = 0;
  uint8_t pad1[3] = {};
};
static_assert(std::is_trivially_copyable_v<RankPlacement>, "exchanged as raw bytes");

struct PlacementInput {
  int rank = 0;
  std::string hostId;
  std::string hostname;
  int pid = 0;
  std::vector<int> cpus;  // affinity mask (boundCpus())
  int gpu = -1;           // index into HostTopo::gpus, -1 for a CPU-only rank
  int tieBreak = 0;       // spreads ranks over equally close NICs (e.g. the local rank)
  uint64_t kernelId = 0;  // runningKernelId()
  // The interface its inter-host traffic leaves through and that interface's effective
  // speed (topology/netdev.hpp); used where hwloc knows no NIC or knows it unshaped.
  std::string netName;
  uint64_t netSpeedMbps = 0;
  double rootRttUs = 0;  // Bootstrap::rootRttUs()
};

// A hash of /proc/sys/kernel/random/boot_id (0 when unreadable).
uint64_t runningKernelId();

// Describes one rank on `topo`. Throws collInvalidArgument for a GPU index the topology
// does not have (or beyond kPlacementMaxGpus) or a host id that does not fit.
RankPlacement makePlacement(const HostTopo& topo, const PlacementInput& in);
// Checks a placement received from a peer (magic, rank, terminated strings, ranges);
// throws collRemoteError naming the rank and the field.
void validatePlacement(const RankPlacement& p, int expectRank);

struct HostGroup {
  std::string hostId;
  std::string hostname;
  std::vector<int> ranks;  // ascending
  int leader = -1;
};

struct RankLink {
  PathClass cls = PathClass::Self;
  double bwGBs = 0;
  double latUs = 0;
};

class JobTopo {
 public:
  JobTopo() = default;
  // placements[i] must describe rank i (validated). Hosts are ordered by their lowest rank.
  // A host's leader is its lowest rank among those with the best path to their NIC (the
  // lowest rank when no NIC is known), so leaders talk to the network from close by.
  // Hosts that share a kernel (simulated hosts) with ranks pinned to single CPUs prefer,
  // among those, a rank on a CPU that no earlier host's leader is pinned to.
  JobTopo(std::vector<RankPlacement> placements, LinkTable table);

  int nranks() const { return static_cast<int>(ranks_.size()); }
  int nhosts() const { return static_cast<int>(hosts_.size()); }
  const std::vector<HostGroup>& hosts() const { return hosts_; }
  const RankPlacement& placement(int rank) const;
  int hostOf(int rank) const;
  int localRank(int rank) const;  // index in hosts()[hostOf(rank)].ranks
  int localSize(int rank) const;
  int leaderOf(int rank) const;
  std::vector<int> leaders() const;  // one per host, in host order
  PathClass pathClass(int a, int b) const;
  // Class plus assumed bandwidth and latency: the table's, except NVLink pairs (hwloc's
  // NVLink bandwidth) and network pairs (the slower NIC's speed; half the longer measured
  // round trip to the root where that is longer than assumed) unless the user set them.
  // A network pair's table entry is the RDMA one ("network") where both ends reach each
  // other by kernel bypass, or where that is unknown and both NICs are RDMA-capable;
  // otherwise "ethernet". The measured round trip (taken over the bootstrap's TCP
  // connection) says nothing about a kernel-bypass path and is not used for one.
  RankLink link(int a, int b) const;
  // Records how each rank reaches other hosts (one entry per rank, the same on every
  // rank: chooseTransports' netPaths).
  void setNetPaths(const std::vector<NetPath>& paths);
  // a and b are on different hosts and reach each other by kernel bypass: their messages
  // cost no kernel CPU time.
  bool kernelBypass(int a, int b) const;
  const LinkTable& table() const { return table_; }

 private:
  void checkRank(int r, const char* what) const;
  std::vector<RankPlacement> ranks_;
  std::vector<HostGroup> hosts_;
  std::vector<int> hostOf_;
  std::vector<int> localRank_;
  LinkTable table_;
};

// The view of a sub-communicator (collCommSplit) without a new exchange: old rank
// members[i] becomes rank i. Throws collInvalidArgument for a repeated or unknown rank.
JobTopo subJob(const JobTopo& job, const std::vector<int>& members);

// Ranks by locality: hosts in host order, each host's ranks contiguous and sorted by
// package, NUMA node, GPU PCI bus id, first CPU, rank, so that ranks close in the order
// are close on the host. The tree, halving and dissemination algorithms and the
// hierarchical grid place ranks by it (their partners are positions apart).
std::vector<int> localityOrder(const JobTopo& job);

// Ranks in ring order, which the rings and chains follow: the locality order, in which
// consecutive ranks are as close as the host allows and each host is entered and left
// once, with each host's run made to begin and end at ranks closest to their NIC when
// the job spans hosts (nicEnds).
std::vector<int> ringOrder(const JobTopo& job);

// One host's ranks, already in locality order, as the walk a ring takes through the host
// when the job spans hosts: the locality order cut open at the best place, so that its
// first rank (which receives from the network) and its last (which sends on) are as
// close to their NICs as the host allows without the walk costing more. Each cut is
// rated by the classes of its hops plus the classes of its two ends' paths to their
// NICs, worst class first; then by the ends alone; then the plain order wins ties.
// Cutting a cycle keeps the rest of the locality order. With one NIC, the number of
// inter-socket hops is the same wherever the cut is (the walk must reach the other
// socket and come back), so the ends decide: the ring enters and leaves next to the
// NIC, and the NIC's DMA and the network stack's copies stay on its node, where RDMA is
// fastest (NCCL too starts and ends its rings at GPUs near the NIC).
std::vector<int> nicEnds(const JobTopo& job, const std::vector<int>& local);

// A table of hosts, leaders, per-rank placement and ring order, for collective-info and logs.
std::string describeJob(const JobTopo& job);

}  // namespace coll
