// A rank's description of itself (RankPlacement), and the checks applied to one received
// from a peer before anything trusts its fields.
#include <fstream>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.hpp"
#include "topology/job.hpp"

namespace coll {
namespace {

template <size_t N>
void copyText(char (&dst)[N], const std::string& src) {
  size_t n = std::min(src.size(), N - 1);
  memcpy(dst, src.data(), n);
  dst[n] = 0;
}

template <size_t N>
bool terminated(const char (&s)[N]) {
  return memchr(s, 0, N) != nullptr;
}

Locality completed(const HostTopo& topo, Locality l) {
  if (l.package < 0 && l.numa >= 0) l.package = topo.numas[l.numa].package;
  return l;
}

// Where the rank's traffic to its NIC starts: its GPU, else its CPUs.
DevRef nicSource(const RankPlacement& p) {
  if (p.gpu >= 0) return DevRef::gpu(p.gpu);
  if (p.numa >= 0) return DevRef::numa(p.numa);
  if (p.package >= 0) return DevRef::package(p.package);
  return DevRef::host();
}

}  // namespace

uint64_t runningKernelId() {
  static const uint64_t id = [] {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string s;
    if (!(f >> s) || s.empty()) return uint64_t{0};
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h ? h : 1;
  }();
  return id;
}

RankPlacement makePlacement(const HostTopo& topo, const PlacementInput& in) {
  RankPlacement p;
  COLL_CHECK_ARG(!in.hostId.empty() && in.hostId.size() < sizeof p.hostId, "topology: host id '",
                 in.hostId, "' must have 1 to ", sizeof p.hostId - 1, " characters (COLL_HOST_ID)");
  p.rank = in.rank;
  copyText(p.hostId, in.hostId);
  copyText(p.hostname, in.hostname);  // display only: truncation is harmless
  p.pid = in.pid;
  Locality cpu = localityOfCpus(topo, in.cpus);
  p.package = static_cast<int16_t>(cpu.package);
  p.numa = static_cast<int16_t>(cpu.numa);
  p.hostPackages = static_cast<int16_t>(topo.detailed ? topo.packages.size() : 0);
  p.hostNumas = static_cast<int16_t>(topo.detailed ? topo.numas.size() : 0);
  p.firstCpu = in.cpus.empty() ? -1 : *std::min_element(in.cpus.begin(), in.cpus.end());
  p.cpus = static_cast<uint32_t>(in.cpus.size());
  p.kernelId = in.kernelId;
  COLL_CHECK_ARG(std::isfinite(in.rootRttUs) && in.rootRttUs >= 0 && in.rootRttUs < 1e9,
                 "topology: rank ", in.rank, " has a bad round-trip time to the root (", in.rootRttUs, " us)");
  p.rootRttUs = static_cast<float>(in.rootRttUs);
  memset(p.gpuPath, kNoPath, sizeof p.gpuPath);
  if (in.gpu >= 0) {
    int ngpus = static_cast<int>(topo.gpus.size());
    COLL_CHECK_ARG(in.gpu < ngpus, "topology: rank ", in.rank, " names GPU ", in.gpu, " but the host has ",
                   ngpus, " GPUs");
    COLL_CHECK_ARG(ngpus <= kPlacementMaxGpus, "topology: the host has ", ngpus,
                   " GPUs; placements describe at most ", kPlacementMaxGpus);
    const GpuInfo& g = topo.gpus[in.gpu];
    Locality gl = completed(topo, g.loc);
    p.gpu = static_cast<int16_t>(in.gpu);
    p.gpuPackage = static_cast<int16_t>(gl.package);
    p.gpuNuma = static_cast<int16_t>(gl.numa);
    p.hostGpus = static_cast<uint8_t>(ngpus);
    copyText(p.gpuBusId, g.busId);
    for (int j = 0; j < ngpus; ++j) {
      p.gpuPath[j] = static_cast<uint8_t>(classify(topo, DevRef::gpu(in.gpu), DevRef::gpu(j)));
      if (!topo.nvlinkGBs.empty()) p.gpuNvlinkGBs[j] = static_cast<float>(topo.nvlinkGBs[in.gpu][j]);
    }
  }
  int nic = chooseNic(topo, nicSource(p), in.tieBreak);
  if (nic >= 0) {
    const NicInfo& n = topo.nics[nic];
    p.nic = static_cast<int16_t>(nic);
    p.nicKind = static_cast<uint8_t>(n.kind);
    p.nicPath = static_cast<uint8_t>(classify(topo, nicSource(p), DevRef::nic(nic)));
    p.nicSpeedMbps = n.speedMbps;
    // The same interface seen by the socket layer: its shaped rate may be lower.
    if (in.netSpeedMbps && in.netName == n.name && (!p.nicSpeedMbps || in.netSpeedMbps < p.nicSpeedMbps))
      p.nicSpeedMbps = in.netSpeedMbps;
    copyText(p.nicName, n.name);
  } else if (in.netSpeedMbps) {
    // No NIC hwloc could see (a virtual interface): its speed still bounds the network.
    p.nicSpeedMbps = in.netSpeedMbps;
    copyText(p.nicName, in.netName);
  }
  return p;
}

void validatePlacement(const RankPlacement& p, int expectRank) {
  auto bad = [&](const char* field, auto value) {
    COLL_THROW(collRemoteError, "topology: rank ", expectRank, " sent a placement with a bad ", field,
               " (", value, ")");
  };
  if (p.magic != kPlacementMagic) bad("layout version (mixed library versions?)", p.magic);
  if (p.rank != expectRank) bad("rank", p.rank);
  if (!terminated(p.hostId) || p.hostId[0] == 0) bad("host id", "empty or unterminated");
  if (!terminated(p.hostname)) bad("host name", "unterminated");
  if (!terminated(p.gpuBusId)) bad("GPU bus id", "unterminated");
  if (!terminated(p.nicName)) bad("NIC name", "unterminated");
  if (p.hostPackages < 0 || p.hostNumas < 0) bad("host package/NUMA count", p.hostPackages);
  if (p.package < -1 || (p.hostPackages > 0 && p.package >= p.hostPackages)) bad("package", p.package);
  if (p.numa < -1 || (p.hostNumas > 0 && p.numa >= p.hostNumas)) bad("NUMA node", p.numa);
  if (p.hostGpus > kPlacementMaxGpus) bad("GPU count", int(p.hostGpus));
  if (p.gpu < -1 || (p.gpu >= 0 && p.gpu >= p.hostGpus)) bad("GPU index", p.gpu);
  if (p.gpu >= 0)
    for (int j = 0; j < p.hostGpus; ++j) {
      if (p.gpuPath[j] >= kNumPathClasses) bad("GPU path class", int(p.gpuPath[j]));
      if (!std::isfinite(p.gpuNvlinkGBs[j]) || p.gpuNvlinkGBs[j] < 0) bad("NVLink bandwidth", p.gpuNvlinkGBs[j]);
    }
  if (p.nic < -1) bad("NIC index", p.nic);
  if (!std::isfinite(p.rootRttUs) || p.rootRttUs < 0 || p.rootRttUs >= 1e9f) bad("round-trip time", p.rootRttUs);
  if (p.netPath > static_cast<uint8_t>(NetPath::Bypass)) bad("network path", int(p.netPath));
  if (p.nic >= 0 && (p.nicPath >= kNumPathClasses || p.nicKind >= kNumNicKinds))
    bad("NIC path/kind", int(p.nicPath));
}

}  // namespace coll
