// The cost primitives of the alpha-beta-gamma model that prices each algorithm per call.
//
// A stage costs the worst latency among its concurrent flows plus its bytes over the
// worst bandwidth, where flows that leave (or enter) one host at the same time share that
// host's network link. Pipelined algorithms add one message cost per chunk and overlap
// the reduction of one chunk with the transfer of the next (the larger of the two
// counts); step-by-step ones add reduction and transfer. The link figures come from the
// job topology (src/topology: per path class, NIC speed, user overrides), so the model
// counts exactly how often each algorithm crosses a slow link. Each algorithm builds its
// estimate from these primitives (Algorithm::estimate, with a CostContext).
//
// Everything here is a pure function of the topology and the configuration, identical on
// every rank, so every rank picks the same algorithm without talking to the others.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

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

}  // namespace coll
