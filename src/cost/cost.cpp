#include "cost/cost.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "base/config.hpp"
#include "base/error.hpp"
#include "transport/transport.hpp"

namespace coll {

COLL_PARAM(kMsgUs, "COLL_TUNE_MSG_US", "2", "cost model: microseconds of software overhead per message");
COLL_PARAM(kNetMsgUs, "COLL_TUNE_NET_MSG_US", "8",
           "cost model: kernel CPU microseconds of one inter-host message, which queue where a kernel runs more at once than it has CPUs");
COLL_PARAM(kWakeUs, "COLL_TUNE_WAKE_US", "50",
           "cost model: microseconds to wake a rank that slept through a stage of other ranks longer than 100 us");
COLL_PARAM(kOversubUs, "COLL_TUNE_OVERSUB_US", "3", "cost model: extra microseconds per message for each rank beyond one per CPU on a host");
COLL_PARAM(kReduceGBs, "COLL_TUNE_REDUCE_GBS", "4", "cost model: reduction throughput in GB/s");
COLL_PARAM(kHierSegment, "COLL_HIER_SEGMENT_BYTES", "4M",
           "hierarchical all-reduce (rings), all-gather, reduce-scatter: bytes per segment of their overlapped "
           "intra/inter-host phases (at least 4K)");
COLL_PARAM(kHierVariant, "COLL_HIER_VARIANT", "auto",
           "hierarchical all-reduce: 'rings', 'leaders' or 'auto' (the cost model's pick)");

CostParams CostParams::fromConfig(const Config& cfg, size_t chunkBytes) {
  CostParams p;
  p.msgUs = std::max(0.0, cfg.getDouble(kMsgUs));
  p.netMsgUs = std::max(0.0, cfg.getDouble(kNetMsgUs));
  p.wakeUs = std::max(0.0, cfg.getDouble(kWakeUs));
  p.reduceGBs = std::max(0.01, cfg.getDouble(kReduceGBs));
  p.chunkBytes = std::max<size_t>(64, chunkBytes);
  p.hierSegmentBytes = std::max<size_t>(4096, cfg.getSize(kHierSegment));
  const std::string& variant = cfg.getStr(kHierVariant);
  COLL_CHECK_ARG(variant == "auto" || variant == "rings" || variant == "leaders",
                 "COLL_HIER_VARIANT must be auto, rings or leaders (got '", variant, "')");
  p.hierVariant = variant == "rings"     ? CostParams::HierVariant::Rings
                  : variant == "leaders" ? CostParams::HierVariant::Leaders
                                         : CostParams::HierVariant::Auto;
  return p;
}

KernelGroups kernelGroups(const JobTopo& job) {
  // Ranks share CPUs when they run on one kernel, whatever host they claim to be on
  // (simulated hosts); without a kernel id, by host.
  KernelGroups g;
  g.of.assign(static_cast<size_t>(job.nranks()), 0);
  std::vector<uint64_t> keys;
  std::vector<std::vector<int>> members;
  for (int h = 0; h < job.nhosts(); ++h)
    for (int r : job.hosts()[h].ranks) {
      uint64_t k = job.placement(r).kernelId;
      uint64_t key = k ? k : (uint64_t{1} << 63) | static_cast<uint64_t>(h);
      auto it = std::find(keys.begin(), keys.end(), key);
      if (it == keys.end()) {
        keys.push_back(key);
        members.push_back({});
        it = keys.end() - 1;
      }
      g.of[static_cast<size_t>(r)] = static_cast<int>(it - keys.begin());
      members[static_cast<size_t>(it - keys.begin())].push_back(r);
    }
  for (const auto& m : members) {
    size_t cpus = 0;
    std::vector<int32_t> firsts;
    for (int r : m) {
      const RankPlacement& p = job.placement(r);
      cpus = std::max<size_t>(cpus, p.cpus);
      if (p.firstCpu >= 0 && std::find(firsts.begin(), firsts.end(), p.firstCpu) == firsts.end())
        firsts.push_back(p.firstCpu);
    }
    g.ranks.push_back(static_cast<int>(m.size()));
    g.cpus.push_back(static_cast<double>(std::max(cpus, firsts.size())));
  }
  return g;
}

double oversubscription(const JobTopo& job) {
  KernelGroups g = kernelGroups(job);
  double worst = 1.0;
  for (size_t k = 0; k < g.cpus.size(); ++k)
    if (g.cpus[k] > 0) worst = std::max(worst, g.ranks[k] / g.cpus[k]);
  return worst;
}

CostParams CostParams::forJob(const Config& cfg, size_t chunkBytes, const JobTopo& job) {
  CostParams p = fromConfig(cfg, chunkBytes);
  const double over = oversubscription(job);
  p.oversubUs = std::max(0.0, cfg.getDouble(kOversubUs)) * (over - 1.0);
  p.msgUs += p.oversubUs;
  // Each rank gets 1/over of a core for its reductions.
  p.reduceGBs /= over;
  p.sharedCpus = over > 1.0;
  p.localInKernel = transportMode(cfg) == "tcp";
  return p;
}

Hop flowsHop(const JobTopo& job, const std::vector<std::pair<int, int>>& flows, double netMsgUs,
             const KernelGroups* groups) {
  Hop h;
  if (flows.empty()) return Hop{0, 1e9};
  // Flows leaving or entering a host through its network link share it.
  std::map<int, int> out, in;
  for (auto [a, b] : flows)
    if (job.hostOf(a) != job.hostOf(b)) {
      ++out[job.hostOf(a)];
      ++in[job.hostOf(b)];
    }
  h.latUs = 0;
  for (auto [a, b] : flows) {
    RankLink l = job.link(a, b);
    double share = 1;
    if (l.cls == PathClass::Network) share = std::max(out[job.hostOf(a)], in[job.hostOf(b)]);
    h.latUs = std::max(h.latUs, l.latUs);
    h.bwGBs = std::min(h.bwGBs, std::max(1e-6, l.bwGBs) / share);
  }
  const bool localInKernel = groups && groups->localInKernel;
  if (netMsgUs > 0 && (!out.empty() || localInKernel)) {
    // Each inter-host message (and, over sockets, each intra-host one) costs its sender's
    // and its receiver's kernel CPU time (the socket calls, the protocol stack), half
    // each; kernel-bypass messages (JobTopo::kernelBypass) do not. More of them at once than a kernel has CPUs wait for each other: the stage
    // takes that much longer.
    KernelGroups own;
    if (!groups) own = kernelGroups(job);
    const KernelGroups& g = groups ? *groups : own;
    std::vector<double> ends(g.cpus.size(), 0.0);
    for (auto [a, b] : flows)
      if ((localInKernel || job.hostOf(a) != job.hostOf(b)) && !job.kernelBypass(a, b)) {
        ends[static_cast<size_t>(g.of[static_cast<size_t>(a)])] += 0.5;
        ends[static_cast<size_t>(g.of[static_cast<size_t>(b)])] += 0.5;
      }
    double queue = 0;
    for (size_t k = 0; k < ends.size(); ++k)
      if (g.cpus[k] > 0) queue = std::max(queue, ends[k] / g.cpus[k] - 1.0);
    h.latUs += netMsgUs * queue;
  }
  return h;
}

int hierSegments(size_t bytes, const CostParams& p) {
  size_t g = (bytes + p.hierSegmentBytes - 1) / p.hierSegmentBytes;
  return static_cast<int>(std::clamp<size_t>(g, 1, 256));
}

}  // namespace coll
