// The job-level view built from every rank's placement: hosts, leaders, pair paths, rings.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <map>
#include <tuple>

#include "base/error.hpp"
#include "topology/job.hpp"

namespace coll {
namespace {

// CPU-side class of two ranks of one host, from where their CPUs are.
PathClass cpuClass(const RankPlacement& a, const RankPlacement& b) {
  if (a.numa >= 0 && a.numa == b.numa) return PathClass::Numa;
  if (a.hostNumas == 1) return PathClass::Numa;
  if (a.package >= 0 && a.package == b.package) return PathClass::Package;
  if (a.hostPackages == 1) return PathClass::Package;  // one socket, NUMA unknown
  return PathClass::CrossSocket;
}

bool isRdma(const RankPlacement& p) {
  return p.nic >= 0 && isFabric(static_cast<NicKind>(p.nicKind));
}

// "dddd:bb:dd.f" as a number that sorts like the PCI hierarchy (buses below a bridge are
// numbered within the bridge's range, so bus order keeps switches together).
uint64_t busKey(const char* busId) {
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  if (sscanf(busId, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) return UINT64_MAX;
  return (uint64_t(dom) << 24) | (uint64_t(bus) << 16) | (uint64_t(dev) << 8) | fn;
}

int orUnknownLast(int v) { return v < 0 ? INT_MAX : v; }

}  // namespace

JobTopo::JobTopo(std::vector<RankPlacement> placements, LinkTable table)
    : ranks_(std::move(placements)), table_(table) {
  COLL_CHECK_ARG(!ranks_.empty(), "topology: a job needs at least one rank's placement");
  for (int r = 0; r < nranks(); ++r) validatePlacement(ranks_[r], r);
  std::map<std::string, int> byId;
  hostOf_.resize(ranks_.size());
  localRank_.resize(ranks_.size());
  for (int r = 0; r < nranks(); ++r) {
    auto [it, fresh] = byId.emplace(ranks_[r].hostId, nhosts());
    if (fresh) hosts_.push_back({ranks_[r].hostId, ranks_[r].hostname, {}, -1});
    HostGroup& h = hosts_[it->second];
    hostOf_[r] = it->second;
    localRank_[r] = static_cast<int>(h.ranks.size());
    h.ranks.push_back(r);
  }
  // Simulated hosts on one kernel share its CPUs. Where ranks are pinned to one CPU
  // each, two leaders on the same CPU would take turns at every inter-host exchange
  // (measured: 26 us against 17 us for the 8 B hierarchical all-reduce on 2 x 2 ranks),
  // so among equally close candidates a later host prefers a rank whose CPU no earlier
  // leader on its kernel holds.
  std::vector<std::pair<uint64_t, int32_t>> leaderCpus;  // (kernel, CPU) of pinned leaders
  auto pinnedTo = [&](int r) { return ranks_[r].cpus == 1 ? ranks_[r].firstCpu : -1; };
  for (HostGroup& h : hosts_) {
    auto clash = [&](int r) {
      const int32_t cpu = pinnedTo(r);
      return cpu >= 0 && ranks_[r].kernelId != 0 &&
             std::find(leaderCpus.begin(), leaderCpus.end(), std::make_pair(ranks_[r].kernelId, cpu)) !=
                 leaderCpus.end();
    };
    auto key = [&](int r) { return std::make_tuple(ranks_[r].nicPath, clash(r), r); };
    h.leader = *std::min_element(h.ranks.begin(), h.ranks.end(),
                                 [&](int a, int b) { return key(a) < key(b); });
    if (pinnedTo(h.leader) >= 0 && ranks_[h.leader].kernelId != 0)
      leaderCpus.emplace_back(ranks_[h.leader].kernelId, pinnedTo(h.leader));
  }
}

void JobTopo::checkRank(int r, const char* what) const {
  COLL_CHECK_ARG(r >= 0 && r < nranks(), "topology: ", what, " ", r, " is not a rank of the job (", nranks(),
                 " ranks)");
}

const RankPlacement& JobTopo::placement(int rank) const {
  checkRank(rank, "rank");
  return ranks_[rank];
}

int JobTopo::hostOf(int rank) const {
  checkRank(rank, "rank");
  return hostOf_[rank];
}

int JobTopo::localRank(int rank) const {
  checkRank(rank, "rank");
  return localRank_[rank];
}

int JobTopo::localSize(int rank) const { return static_cast<int>(hosts_[hostOf(rank)].ranks.size()); }

int JobTopo::leaderOf(int rank) const { return hosts_[hostOf(rank)].leader; }

std::vector<int> JobTopo::leaders() const {
  std::vector<int> out;
  for (const HostGroup& h : hosts_) out.push_back(h.leader);
  return out;
}

PathClass JobTopo::pathClass(int a, int b) const {
  checkRank(a, "rank a");
  checkRank(b, "rank b");
  if (a == b) return PathClass::Self;
  if (hostOf_[a] != hostOf_[b]) return PathClass::Network;
  const RankPlacement& pa = ranks_[a];
  const RankPlacement& pb = ranks_[b];
  // Two GPUs: the path between the devices, as the GPU's owner classified it on the host.
  if (pa.gpu >= 0 && pb.gpu >= 0 && pa.gpu != pb.gpu && pb.gpu < pa.hostGpus)
    return static_cast<PathClass>(pa.gpuPath[pb.gpu]);
  return cpuClass(pa, pb);
}

RankLink JobTopo::link(int a, int b) const {
  PathClass c = pathClass(a, b);
  int slot = static_cast<int>(c);
  const RankPlacement& pa = ranks_[a];
  const RankPlacement& pb = ranks_[b];
  RankLink l{c, table_.of(c).bwGBs, table_.of(c).latUs};
  if (c == PathClass::NVLink && !table_.userBw[slot] && pa.gpuNvlinkGBs[pb.gpu] > 0)
    l.bwGBs = pa.gpuNvlinkGBs[pb.gpu];
  if (c == PathClass::Network) {
    const auto na = static_cast<NetPath>(pa.netPath), nb = static_cast<NetPath>(pb.netPath);
    const bool known = na != NetPath::Unknown && nb != NetPath::Unknown;
    const bool bypass = na == NetPath::Bypass && nb == NetPath::Bypass;
    bool rdma = known ? bypass : isRdma(pa) && isRdma(pb);
    int costSlot = rdma ? slot : kNumPathClasses;
    const LinkCost& cost = rdma ? table_.of(c) : table_.ethernet;
    l = {c, cost.bwGBs, cost.latUs};
    // The slower end bounds the pair (Mb/s -> GB/s).
    if (!table_.userBw[costSlot] && pa.nicSpeedMbps > 0 && pb.nicSpeedMbps > 0)
      l.bwGBs = static_cast<double>(std::min(pa.nicSpeedMbps, pb.nicSpeedMbps)) / 8000.0;
    // A long or delayed network: the root sits with rank 0, so the rank of the pair on
    // another host measured the crossing (both did, between two other hosts: roughly).
    const double measured = std::max(pa.rootRttUs, pb.rootRttUs) / 2.0;
    if (!bypass && !table_.userLat[costSlot] && measured > l.latUs) l.latUs = measured;
  }
  return l;
}

void JobTopo::setNetPaths(const std::vector<NetPath>& paths) {
  COLL_CHECK_ARG(paths.size() == ranks_.size(), "topology: ", paths.size(), " network paths for ", ranks_.size(),
                 " ranks");
  for (size_t r = 0; r < paths.size(); ++r) ranks_[r].netPath = static_cast<uint8_t>(paths[r]);
}

bool JobTopo::kernelBypass(int a, int b) const {
  checkRank(a, "kernelBypass");
  checkRank(b, "kernelBypass");
  return hostOf_[a] != hostOf_[b] && static_cast<NetPath>(ranks_[a].netPath) == NetPath::Bypass &&
         static_cast<NetPath>(ranks_[b].netPath) == NetPath::Bypass;
}

JobTopo subJob(const JobTopo& job, const std::vector<int>& members) {
  std::vector<RankPlacement> ps;
  std::vector<bool> seen(job.nranks(), false);
  for (int old : members) {
    RankPlacement p = job.placement(old);  // checks the range
    COLL_CHECK_ARG(!seen[old], "topology: rank ", old, " appears twice in a sub-communicator");
    seen[old] = true;
    p.rank = static_cast<int32_t>(ps.size());
    ps.push_back(p);
  }
  return JobTopo(std::move(ps), job.table());
}

std::vector<int> nicEnds(const JobTopo& job, const std::vector<int>& local) {
  const int n = static_cast<int>(local.size());
  if (n < 3) return local;  // both ranks are ends either way
  // Classes counted worst first, so that comparing two tallies compares the worst class
  // first; slot 0 is a NIC end with no NIC known.
  using Tally = std::array<int, kNumPathClasses + 1>;
  auto worstFirst = [](int cls) { return kNumPathClasses - cls; };
  auto nicClass = [&](int r) {
    const RankPlacement& p = job.placement(r);
    return p.nic >= 0 && p.nicPath < kNumPathClasses ? int(p.nicPath) : kNumPathClasses;
  };
  Tally cycle{};
  for (int i = 0; i < n; ++i) ++cycle[worstFirst(int(job.pathClass(local[i], local[(i + 1) % n])))];
  // Cutting the cycle before position k: the walk local[k..] + local[..k), entered at
  // local[k] and left from local[k - 1].
  auto tally = [&](int k) {
    const int first = local[k], last = local[(k + n - 1) % n];
    Tally hops = cycle, ends{};
    --hops[worstFirst(int(job.pathClass(last, first)))];
    ++ends[worstFirst(nicClass(first))];
    ++ends[worstFirst(nicClass(last))];
    for (size_t c = 0; c < hops.size(); ++c) hops[c] += ends[c];
    return std::make_pair(hops, ends);
  };
  int best = 0;
  auto bestTally = tally(0);
  for (int k = 1; k < n; ++k) {
    auto t = tally(k);
    if (t < bestTally) best = k, bestTally = t;
  }
  std::vector<int> out(local.begin() + best, local.end());
  out.insert(out.end(), local.begin(), local.begin() + best);
  return out;
}

namespace {

// One host's ranks sorted by locality (localityOrder).
std::vector<int> byLocality(const JobTopo& job, const HostGroup& h) {
  std::vector<int> local = h.ranks;
  auto key = [&](int r) {
    const RankPlacement& p = job.placement(r);
    bool g = p.gpu >= 0;
    return std::make_tuple(orUnknownLast(g ? p.gpuPackage : p.package), orUnknownLast(g ? p.gpuNuma : p.numa),
                           g ? busKey(p.gpuBusId) : UINT64_MAX, orUnknownLast(p.firstCpu), r);
  };
  std::sort(local.begin(), local.end(), [&](int a, int b) { return key(a) < key(b); });
  return local;
}

}  // namespace

std::vector<int> localityOrder(const JobTopo& job) {
  std::vector<int> order;
  order.reserve(job.nranks());
  for (const HostGroup& h : job.hosts()) {
    std::vector<int> local = byLocality(job, h);
    order.insert(order.end(), local.begin(), local.end());
  }
  return order;
}

std::vector<int> ringOrder(const JobTopo& job) {
  std::vector<int> order;
  order.reserve(job.nranks());
  for (const HostGroup& h : job.hosts()) {
    std::vector<int> local = byLocality(job, h);
    if (job.nhosts() > 1) local = nicEnds(job, local);
    order.insert(order.end(), local.begin(), local.end());
  }
  return order;
}

}  // namespace coll
