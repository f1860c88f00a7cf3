#include "topology/exchange.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "base/error.hpp"
#include "base/log.hpp"

namespace coll {
namespace {

// (domain, bus, device, function) of "dddd:bb:dd.f" (any number of hex digits per field),
// or false. Strict: sscanf's %x would also take "0x" prefixes and trailing junk.
bool parseBusId(const std::string& text, unsigned v[4]) {
  const char seps[4] = {':', ':', '.', 0};
  size_t pos = 0;
  for (int f = 0; f < 4; ++f) {
    size_t start = pos;
    while (pos < text.size() && isxdigit(static_cast<unsigned char>(text[pos]))) ++pos;
    if (pos == start || pos - start > 8) return false;
    v[f] = static_cast<unsigned>(strtoul(text.substr(start, pos - start).c_str(), nullptr, 16));
    if (seps[f] == 0) return pos == text.size();
    if (pos >= text.size() || text[pos] != seps[f]) return false;
    ++pos;
  }
  return false;
}

}  // namespace

int hostLocalRank(const std::vector<PeerInfo>& peers, int rank) {
  COLL_CHECK_ARG(rank >= 0 && static_cast<size_t>(rank) < peers.size(), "topology: rank ", rank,
                 " is not below the job size ", peers.size());
  int local = 0;
  for (int r = 0; r < rank; ++r) local += peers[r].hostId == peers[rank].hostId;
  return local;
}

JobTopo exchangeJobTopo(Bootstrap& boot, const HostTopo& topo, const LinkTable& table, int gpu,
                        const LocalNet& net) {
  const int me = boot.rank(), n = boot.nranks();
  const PeerInfo& self = boot.peers()[me];
  PlacementInput in;
  in.rank = me;
  in.hostId = self.hostId;
  in.hostname = self.hostname;
  in.pid = self.pid;
  in.cpus = boundCpus();
  in.gpu = gpu;
  in.tieBreak = hostLocalRank(boot.peers(), me);
  in.kernelId = runningKernelId();
  in.netName = net.name;
  in.netSpeedMbps = net.speedMbps;
  in.rootRttUs = boot.rootRttUs();
  RankPlacement mine = makePlacement(topo, in);
  std::vector<uint8_t> bytes = boot.allGather(&mine, sizeof mine);
  COLL_ENFORCE_EQ(bytes.size(), sizeof mine * n, collInternalError, "topology: placement all-gather size");
  std::vector<RankPlacement> all(n);
  memcpy(all.data(), bytes.data(), bytes.size());
  JobTopo job(std::move(all), table);
  COLL_TRACE("topology: %d ranks on %d hosts, this rank's local rank %d, leader %d", n, job.nhosts(),
             job.localRank(me), job.leaderOf(me));
  return job;
}

int findGpuByBusId(const HostTopo& topo, const std::string& busId) {
  unsigned want[4], have[4];
  if (!parseBusId(busId, want)) return -1;
  for (size_t i = 0; i < topo.gpus.size(); ++i)
    if (parseBusId(topo.gpus[i].busId, have) && memcmp(want, have, sizeof want) == 0) return static_cast<int>(i);
  return -1;
}

int rankGpu(const HostTopo& topo, const std::string& mode, int localRank, const std::string& currentBusId) {
  if (mode == "none") return -1;
  if (mode == "local-rank") {
    if (topo.gpus.empty()) {
      COLL_INFO("topology: COLL_RANK_GPU=local-rank, but the host has no GPUs");
      return -1;
    }
    return std::max(localRank, 0) % static_cast<int>(topo.gpus.size());
  }
  COLL_CHECK_ARG(mode == "auto", "COLL_RANK_GPU='", mode, "': expected auto, local-rank or none");
  if (currentBusId.empty()) return -1;
  const int gpu = findGpuByBusId(topo, currentBusId);
  if (gpu < 0)
    COLL_INFO("topology: the current CUDA device %s is not among the topology's %zu GPUs; no GPU for this rank",
              currentBusId.c_str(), topo.gpus.size());
  return gpu;
}

}  // namespace coll
