// The alpha-beta-gamma cost model that picks an algorithm per call.
//
// Each algorithm is described by the transfers it makes, stage by stage, over the real
// ranks of the communicator: a stage costs the worst latency among its concurrent flows
// plus its bytes over the worst bandwidth, where flows that leave (or enter) one host at
// the same time share that host's network link. Pipelined algorithms add one message
// cost per chunk, and overlap the reduction of one chunk with the transfer of the next
// (the larger of the two counts); step-by-step ones add reduction and transfer. The link figures
// come from the job topology (src/topology: per path class, NIC speed, user overrides),
// so the model counts exactly how often each algorithm crosses a slow link.
//
// Everything here is a pure function of the topology and the configuration, identical on
// every rank, so every rank picks the same algorithm without talking to the others.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/patterns/layout.hpp"
#include "core/op.hpp"
#include "topology/job.hpp"

namespace coll {

class Config;

// One stage's effective link: latency in microseconds, bandwidth in GB/s (1e3 bytes/us).
struct Hop {
  double latUs = 0;
  double bwGBs = 1e9;
  double time(double bytes) const { return latUs + bytes / (bwGBs * 1e3); }
  double wire(double bytes) const { return bytes / (bwGBs * 1e3); }
};

struct CostParams {
  double msgUs = 1.0;          // software cost of posting and completing one message
  // The part of msgUs that is waiting for the receiver to be scheduled where ranks share
  // CPUs (forJob): messages posted at once to several peers wait for them together.
  double oversubUs = 0.0;
  double netMsgUs = 0.0;       // kernel CPU time of one inter-host message (see flowsHop)
  // Waking a rank that slept through a stage of others longer than kSleepsAfterUs (its
  // spin and yields are long over by then).
  double wakeUs = 0.0;
  static constexpr double kSleepsAfterUs = 100;
  double reduceGBs = 4.0;      // reduction throughput of one core
  size_t chunkBytes = 512 << 10;
  size_t hierSegmentBytes = 4 << 20;
  // COLL_HIER_VARIANT: which of its two variants the hierarchical all-reduce runs.
  enum class HierVariant { Auto, Rings, Leaders };
  HierVariant hierVariant = HierVariant::Auto;
  // Ranks share CPUs (forJob: oversubscription > 1): moving bytes and reducing them take
  // the same CPUs, so what the pipelined algorithms overlap (a chunk's transfer with the
  // previous chunk's reduction, the hierarchical intra-host phases with the inter-host
  // one) adds up instead.
  bool sharedCpus = false;
  // COLL_TRANSPORT=tcp: ranks of one host talk through sockets, whose messages cost
  // kernel CPU time like inter-host ones (netMsgUs).
  bool localInKernel = false;
  // max(a, b) for work that overlaps on separate CPUs, a + b when they are shared.
  double overlap(double a, double b) const { return sharedCpus ? a + b : (a > b ? a : b); }
  // The model's tunables from cfg; chunkBytes is the pipelined algorithms' chunk
  // (pipelineChunkBytes(comm), declared with the ring).
  static CostParams fromConfig(const Config& cfg, size_t chunkBytes);
  // fromConfig, plus the job's oversubscription: where a host runs more ranks than it has
  // CPUs for them, every message also waits for its receiver to be scheduled, so each
  // costs COLL_TUNE_OVERSUB_US more per extra rank per CPU, and a rank reduces with its
  // share of a core (reduceGBs / oversubscription), which makes algorithms that reduce
  // every byte once per round (recursive doubling) lose to halving-doubling earlier.
  static CostParams forJob(const Config& cfg, size_t chunkBytes, const JobTopo& job);
};

// The job's ranks grouped by the kernel they run on (simulated hosts of one machine
// share one): each rank's group, and per group its ranks and the CPUs they may use (0
// unknown). A group's CPUs are estimated from its ranks' placements: the largest
// affinity mask, or the number of distinct first CPUs when ranks are pinned apart.
struct KernelGroups {
  std::vector<int> of;
  std::vector<int> ranks;
  std::vector<double> cpus;
  // Messages inside a host go through the kernel too (COLL_TRANSPORT=tcp): flowsHop
  // then queues them with the inter-host ones.
  bool localInKernel = false;
};
KernelGroups kernelGroups(const JobTopo& job);

// Largest ratio over hosts of ranks to the CPUs they may use (1 when not oversubscribed
// or unknown). A host's CPUs are estimated from its ranks' placements: the largest
// affinity mask, or the number of distinct first CPUs when ranks are pinned apart.
double oversubscription(const JobTopo& job);

// The stage made of `flows` (sender, receiver) running at once. Empty: a zero hop.
// netMsgUs > 0: an inter-host message's kernel CPU time (CostParams::netMsgUs), added to
// the stage's latency for every round of such messages queued beyond the CPUs of the
// kernels that run them (groups: kernelGroups(job), computed here when not given; with
// groups->localInKernel, intra-host messages count as well).
Hop flowsHop(const JobTopo& job, const std::vector<std::pair<int, int>>& flows, double netMsgUs = 0,
             const KernelGroups* groups = nullptr);

// Segments the hierarchical all-reduce splits `bytes` into, so its intra-host and
// inter-host phases overlap (shared by the algorithm and its cost).
int hierSegments(size_t bytes, const CostParams& p);

// The hierarchical all-reduce's view of the job: its layout and the cost of its two
// variants. Built once per communicator with the cost model (CostModel::hier), where the
// algorithm looks up its layout and variant per call.
class HierModel {
 public:
  HierModel(const JobTopo& job, const CostParams& p);
  bool usable() const { return hosts_ >= 2; }
  bool uniform() const { return uniform_; }
  // The hosts as a grid and their leaders; its host and local index describe rank 0.
  const patterns::HierLayout& layout() const { return lay_; }
  // Intra-host reduce-scatter, one ring per local index across hosts, intra-host all-gather.
  double ringsUs(size_t bytes) const;
  // Reduce to each host's leader, recursive doubling among leaders, broadcast back.
  double leadersUs(size_t bytes) const;
  // What the algorithm runs: the leader variant when hosts differ in size, when
  // COLL_HIER_VARIANT asks for it, or (auto) when it is the cheaper one.
  bool useLeaders(size_t bytes) const {
    if (!uniform_ || p_.hierVariant == CostParams::HierVariant::Leaders) return true;
    return p_.hierVariant == CostParams::HierVariant::Auto && leadersUs(bytes) <= ringsUs(bytes);
  }
  double bestUs(size_t bytes) const { return useLeaders(bytes) ? leadersUs(bytes) : ringsUs(bytes); }
  // The hierarchical all-gather (reduce: reduce-scatter) of one rank's block: a ring per
  // local index across hosts and a ring of columns inside each host, plus the copy
  // between rank order and column order, in segments that overlap the two. Infinity
  // unless hosts are uniform.
  double gatherScatterUs(double blockBytes, bool reduce) const;

 private:
  CostParams p_;
  patterns::HierLayout lay_;
  int hosts_ = 0;
  int local_ = 1;  // largest host
  bool uniform_ = true;
  Hop intra_, inter_, fan_;
  std::vector<Hop> leaderRounds_;
};

class CostModel {
 public:
  CostModel(const JobTopo& job, const CostParams& p);
  // Estimated microseconds for algorithm `algo` of collective `kind` on `bytes`: the
  // buffer (all-reduce, broadcast, reduce), one rank's block (all-gather input, reduce-
  // scatter output, all-to-all per peer, gather input, scatter output). Infinity for an algorithm the model does not know.
  double estimate(OpKind kind, const std::string& algo, size_t bytes) const;
  const CostParams& params() const { return p_; }
  const HierModel& hier() const { return hier_; }
  // The topology's ring order (patterns::ringLayout), which the rings and chains look up
  // per call, and its locality order (patterns::localityLayout), by which the tree,
  // halving and dissemination algorithms place ranks.
  const patterns::RingLayout& ring() const { return ring_; }
  const patterns::RingLayout& locality() const { return locality_; }

 private:
  double allReduce(const std::string& algo, double s) const;
  double rooted(OpKind kind, const std::string& algo, double s) const;
  double gatherScatter(OpKind kind, const std::string& algo, double block) const;
  double rootedBlocks(const std::string& algo, double block) const;
  double stagesUs(const std::vector<Hop>& hops, const std::vector<double>& bytes, bool reduce) const;
  double reduceUs(double bytes) const { return bytes / (p_.reduceGBs * 1e3); }
  size_t chunksOf(double bytes) const;

  CostParams p_;
  int n_ = 1;
  patterns::RingLayout ring_;
  patterns::RingLayout locality_;
  Hop ringHop_;                  // ring-order ring (ring and chain algorithms follow it)
  Hop ringRank_;                 // rank-order ring (pairwise all-to-all's first step)
  std::vector<Hop> chainHops_;   // each edge of a chain along the ring order, alone
  std::vector<Hop> rdRounds_;    // rank-order recursive doubling: fold, rounds, fold back
  Hop oneshot_;                  // every rank to every other at once
  Hop oneshotNet_;               // the inter-host flows of that stage alone
  double oneshotLocalUsPerByte_ = 0;  // one rank's copies to its same-host peers, per byte
  std::vector<Hop> hdSteps_;     // locality-order halving steps (mask 1, 2, ...)
  Hop hdFold_;
  bool hdFolds_ = false;
  Hop tree_;                     // double binary tree edges
  Hop rootedTree_;               // broadcast/reduce tree edges (root at position 0)
  // Each root-to-leaf path of that tree: summed edge latencies and us per byte, edges.
  struct TreePath {
    double latUs = 0, usPerByte = 0;
    int edges = 0;
  };
  std::vector<TreePath> rootedPaths_;
  int treeDepth_ = 0;
  int treeMsgsPerChunk_ = 0;     // messages (sends + receives) per chunk at the busiest rank
  std::vector<Hop> bruckSteps_;  // all-gather dissemination steps over locality order
  std::vector<Hop> hdRankSteps_; // reduce-scatter halving over rank order (mask p2/2 ... 1)
  Hop hdRankFold_;
  bool hdRankFolds_ = false;
  // Gather and scatter, rooted at locality position 0 (flows toward the root; a scatter's
  // run the other way at the same cost). Direct: every rank with the root at once, the
  // root copying its same-host peers' blocks one after the other (us per byte) while the
  // network ones arrive over its link.
  Hop fan_;
  Hop fanNet_;
  double fanLocalUsPerByte_ = 0;
  // Binomial tree: per round, its edges and the most blocks one of them carries.
  std::vector<std::pair<Hop, int>> binomialRounds_;
  HierModel hier_;
};

}  // namespace coll
