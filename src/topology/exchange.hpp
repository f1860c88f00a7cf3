// Building the job's topology over a bootstrap: the one collective step of src/topology.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "topology/job.hpp"
#include "topology/netdev.hpp"

namespace coll {

// This rank's index among the ranks that share its host identity (PeerInfo::hostId,
// which honours COLL_HOST_ID), counting in rank order.
int hostLocalRank(const std::vector<PeerInfo>& peers, int rank);

// Collective over the bootstrap's ranks. Describes this rank on `topo` (its affinity mask,
// `gpu` (-1: none), its NIC spread over equals by local rank), all-gathers every rank's
// placement and builds the job view, identical on every rank. Throws what the bootstrap
// throws, and collRemoteError for a malformed peer placement.
// `net`: the interface this rank's inter-host traffic leaves through (empty: unknown).
JobTopo exchangeJobTopo(Bootstrap& boot, const HostTopo& topo, const LinkTable& table, int gpu = -1,
                        const LocalNet& net = {});

// The index of the GPU with this PCI bus id, -1 if none. Accepts CUDA's "0000:19:00.0",
// NVML's "00000000:19:00.0" and either case.
int findGpuByBusId(const HostTopo& topo, const std::string& busId);

// The index of the GPU a rank drives on `topo`, by COLL_RANK_GPU (`mode`): "auto", the
// device current in the thread that creates the communicator (`currentBusId`, "" when
// none: see cuda::currentDeviceBusId), looked up by bus id (-1 when the topology lacks
// it, as with another machine's COLL_TOPO_FILE); "local-rank", the GPU numbered like the
// rank's local rank modulo the host's GPUs (a GPU per rank, and planning on a stored
// topology); "none", -1. Throws collInvalidArgument for anything else.
int rankGpu(const HostTopo& topo, const std::string& mode, int localRank, const std::string& currentBusId);

}  // namespace coll
