// One host's hardware as the library sees it: packages, NUMA nodes, cores, caches, the
// GPUs and NICs with their place in the PCI tree. Discovered with hwloc (IO devices
// included), loaded from an hwloc XML file (COLL_TOPO_FILE, tests, planning for another
// machine) or, without hwloc, reduced to the host name and CPU count.
//
// Indexes: packages, NUMA nodes, GPUs and NICs are numbered 0.. in the order hwloc lists
// them (GPUs and NICs sorted by PCI bus id), so every rank on a host numbers them alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/path.hpp"

namespace coll {

class Config;

// What a NIC is. Every kind but Eth is an RDMA-capable fabric device (kernel bypass
// through verbs, libfabric or a vendor library); Eth is a plain Ethernet port.
enum class NicKind : uint8_t { Ib = 0, Roce = 1, Eth = 2, Opa = 3, Efa = 4, Slingshot = 5 };
constexpr int kNumNicKinds = 6;
// "ib", "roce", "ethernet", "opa" (Omni-Path), "efa" (AWS Elastic Fabric Adapter),
// "slingshot" (HPE Cray Cassini).
const char* nicKindName(NicKind k);
inline bool isFabric(NicKind k) { return k != NicKind::Eth; }

// Where a device or a set of CPUs sits; -1 when unknown (e.g. attached to the whole
// machine, or a set of CPUs spanning several NUMA nodes).
struct Locality {
  int package = -1;
  int numa = -1;
};

// One PCI bridge on the way from the host to a device.
struct PciHop {
  uint64_t id = 0;          // unique within the host (hwloc's gp_index)
  bool hostBridge = false;  // the root complex itself, not a switch or root port
  std::string label;        // "0000:17:00.0", or "hostbridge 0000:[16-20]"
};

struct PackageInfo {
  int osIndex = -1;
  std::vector<int> cpus;  // PU os indexes, sorted
  int cores = 0;
  std::string model;
};

struct NumaInfo {
  int osIndex = -1;
  int package = -1;       // where it sits; -1 when it hangs off the whole machine
  std::vector<int> cpus;  // the CPUs whose local memory it is; empty for a memory-only node
  uint64_t memBytes = 0;
  std::string kind;       // hwloc's subtype: "DRAM", "HBM", "MCDRAM", "GPUMemory", "CXL-DRAM", ...; "" none
  std::string gpuBusId;   // the GPU whose memory it is (kind GPUMemory), else ""
  bool memoryOnly() const { return cpus.empty(); }
};

struct CacheInfo {
  int level = 0;
  std::string type;  // "unified", "data", "instruction"
  uint64_t bytes = 0;
  int count = 0;     // instances of this cache in the host
};

struct GpuInfo {
  std::string busId;  // "0000:19:00.0"
  std::string name;   // CUDA OS device ("cuda0"), else NVML ("nvml0"), else ""
  std::string model;
  Locality loc;
  std::vector<PciHop> pciPath;  // from the host bridge down to the GPU's parent bridge
  double pciLinkGBs = 0;        // the device's PCIe link, as hwloc reports it; 0 unknown
  int closestNic = -1;
  // NVLink to a CPU (POWER8/9), from hwloc's NVLink matrix: GB/s and the package; the
  // GPU's traffic to host memory on that package goes over it. 0 / -1 when none.
  double hostNvlinkGBs = 0;
  int hostNvlinkPackage = -1;
};

struct NicInfo {
  std::string name;    // verbs device ("mlx5_0") for ib/roce, interface ("eth0") for eth
  std::string netdev;  // IP interface of the device ("ib0", "ens1f0"); "" if none
  NicKind kind = NicKind::Eth;
  uint64_t speedMbps = 0;  // 0 unknown
  std::string busId;
  Locality loc;
  std::vector<PciHop> pciPath;
  double pciLinkGBs = 0;
};

struct HostTopo {
  std::string hostname;
  std::string source;     // "hwloc", "xml <path>", "none (built without hwloc)"
  bool detailed = false;  // false: nothing but the host name and CPU count is known
  int cores = 0;
  int pus = 0;
  std::vector<PackageInfo> packages;
  std::vector<NumaInfo> numas;
  std::vector<CacheInfo> caches;
  std::vector<GpuInfo> gpus;
  std::vector<NicInfo> nics;
  // NVLink bandwidth between GPUs in GB/s, [gpu][gpu]; 0 = not linked. Empty when the
  // topology carries no NVLinkBandwidth matrix (hwloc's NVML backend provides it).
  std::vector<std::vector<double>> nvlinkGBs;
};

// A device, or a place where a rank's CPU memory lives, for classify().
enum class DevKind : uint8_t { Gpu, Nic, Numa, Package, Host };
struct DevRef {
  DevKind kind = DevKind::Host;
  int index = 0;  // GPU, NIC, NUMA node or package index; ignored for Host (locality unknown)
  static DevRef gpu(int i) { return {DevKind::Gpu, i}; }
  static DevRef nic(int i) { return {DevKind::Nic, i}; }
  static DevRef numa(int i) { return {DevKind::Numa, i}; }
  static DevRef package(int i) { return {DevKind::Package, i}; }
  static DevRef host() { return {DevKind::Host, 0}; }
};

// The path between two devices of one host. Throws collInvalidArgument for an index out
// of range. Unknown locality is classified pessimistically (CrossSocket on a host with
// several packages).
PathClass classify(const HostTopo& topo, DevRef a, DevRef b);
// The index of the NIC a rank at `from` should use: an RDMA-capable fabric device before a
// plain Ethernet port; among those, the ones whose capacity (nicCapacityMbps) is at least
// half the best; among those the closest, then the fastest; `tieBreak` (e.g. the local
// rank) spreads ranks over equals. -1 when the host has no NIC.
int chooseNic(const HostTopo& topo, DevRef from, int tieBreak);
// What a NIC can carry in Mb/s: its port speed, bounded by its PCIe link; the PCIe link
// alone where the port speed is unknown (files the library did not write); 0 neither.
uint64_t nicCapacityMbps(const NicInfo& nic);
// NUMA nodes with CPUs (memory-only nodes left out).
int cpuNumaCount(const HostTopo& topo);
// The NUMA node (else package) containing every CPU in `cpus`; -1 fields when the set
// spans several, is empty or the topology is not detailed.
Locality localityOfCpus(const HostTopo& topo, const std::vector<int>& cpus);

// ---- discovery (hwloc; I/O) ----
// This host's topology: COLL_TOPO_FILE when set (another machine's XML), else hwloc's
// view of this machine with IO devices. COLL_TOPO_DUMP_FILE=path writes what was used as
// hwloc XML. Without hwloc: host name and CPU count only (logged at INFO).
HostTopo discoverLocal(const Config& cfg);
// Loads an hwloc XML file. Throws collInvalidArgument naming the file when it is missing
// or not a topology, collInvalidUsage when built without hwloc.
HostTopo loadXml(const std::string& path);
// The CPUs this process may run on (its affinity mask), sorted.
std::vector<int> boundCpus();

// ---- text ----
// "0-15,32-47" for a sorted CPU list.
std::string cpuListString(const std::vector<int>& cpus);
// "200 Gb/sec (4X HDR)" (sysfs InfiniBand rate) -> 200000 Mb/s; 0 if not understood.
uint64_t parseIbRateMbps(const std::string& text);
// A multi-line human description (what collective-info prints, and COLL_DEBUG=INFO).
std::string describeHost(const HostTopo& topo);
// The GPU x GPU, GPU x NIC and NUMA x NIC path class tables.
std::string describePaths(const HostTopo& topo);

}  // namespace coll
