// Text sections of collective-info that are not part of the library's own descriptions.
#pragma once

#include <ostream>

#include "topology/job.hpp"

namespace coll {
class Comm;
class Config;
}  // namespace coll

namespace coll::tools {

// The assumed bandwidth/latency per path class (after COLL_TOPO_LINK_BW/_LAT).
void printLinkTable(std::ostream& os, const LinkTable& table);
// The network backend this process would use (COLL_NET, COLL_NET_PLUGIN) and its
// devices, or why there is none.
void printNetBackend(std::ostream& os, const Config& cfg);
// Which transport joins rank 0 to each other rank of a live communicator.
void printTransports(std::ostream& os, Comm& comm);
// Path class, bandwidth and latency of each ring hop; the full class matrix for small jobs.
void printRankLinks(std::ostream& os, const JobTopo& job);

}  // namespace coll::tools
