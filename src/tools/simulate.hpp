// collective-info --simulate: what the selector would pick, per collective and size, and
// the cost model's predicted time, for a job of many ranks over many hosts shaped like one
// host (this machine, or an hwloc XML file), without running it. The job is built as a
// launcher would place it: ranks in blocks per host, each with an equal share of the
// host's CPUs (all of them when the host runs more ranks than it has CPUs), GPUs by local
// rank where COLL_RANK_GPU=local-rank, every host a kernel of its own.
#pragma once

#include <cstddef>
#include <ostream>
#include <vector>

#include "topology/topology.hpp"

namespace coll {
class Config;
}

namespace coll::tools {

struct SimulateSpec {
  int nranks = 0;
  int hosts = 1;
  std::vector<size_t> counts;  // float32 counts as the C API takes them; empty: a default set
};

// Throws collInvalidArgument for a job that cannot be built (hosts outside [1, nranks],
// more than kMaxSimulatedRanks ranks).
void printSimulation(std::ostream& os, const HostTopo& host, const Config& cfg, const SimulateSpec& spec);

inline constexpr int kMaxSimulatedRanks = 1 << 17;

}  // namespace coll::tools
