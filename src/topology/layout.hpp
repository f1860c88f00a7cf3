// Where each rank sits in the patterns the topology-aware algorithms use: its position in
// the ring order, and the host x local-index grid of the hierarchical algorithms. Pure
// functions of the job topology, so every rank derives the same layout; a communicator
// builds them once (JobLayouts) for its algorithms and their cost estimates.
#pragma once

#include <vector>

#include "topology/job.hpp"

namespace coll::patterns {

struct RingLayout {
  std::vector<int> order;  // order[pos] = rank
  std::vector<int> pos;    // pos[rank] = position
  int next(int p) const { return order[(p + 1) % order.size()]; }
  int prev(int p) const { return order[(p + order.size() - 1) % order.size()]; }
};

// The job's ring order (ringOrder: hosts contiguous, ranks sorted by locality inside a
// host, each host's run ending next to its NIC), for rings and chains.
RingLayout ringLayout(const JobTopo& job);
// The job's locality order (localityOrder), for trees, halving and dissemination.
RingLayout localityLayout(const JobTopo& job);
// Identity order over n ranks (rank r at position r).
RingLayout identityLayout(int n);
// Inverts an order; throws collInvalidArgument unless it is a permutation of 0..n-1.
RingLayout layoutOf(std::vector<int> order);

// Hosts as rows of a grid: grid[h][i] is the rank with local index i on host h, local
// indices following the locality order inside the host.
struct HierLayout {
  std::vector<std::vector<int>> grid;
  std::vector<int> leaders;  // per host: the topology's leader (best path to the NIC)
  int host = -1;             // this rank's host and local index
  int local = -1;
  bool uniform = true;       // every host has the same number of ranks
  int nhosts() const { return static_cast<int>(grid.size()); }
  int localSize() const { return static_cast<int>(grid[host].size()); }
  // Ranks with local index i on every host, in host order (one inter-host ring).
  std::vector<int> column(int i) const;
};

HierLayout hierLayout(const JobTopo& job, int rank);

// The layouts of one job, built once per communicator: the rings and chains follow `ring`,
// the trees, halving and dissemination algorithms `locality`, the hierarchical ones
// `hier` (rank 0's view: host and local index describe rank 0).
struct JobLayouts {
  RingLayout ring;
  RingLayout locality;
  HierLayout hier;
  static JobLayouts of(const JobTopo& job) { return {ringLayout(job), localityLayout(job), hierLayout(job, 0)}; }
};

// Whether a list of ranks stays on one host at every step of `order`'s ring: number of
// consecutive pairs (including the wrap-around) that cross hosts.
int ringCrossings(const JobTopo& job, const std::vector<int>& order);

}  // namespace coll::patterns
