// Text sections of collective-info that are not part of the library's own descriptions.
#pragma once

#include <ostream>

#include "topology/job.hpp"

namespace coll::tools {

// The assumed bandwidth/latency per path class (after COLL_TOPO_LINK_BW/_LAT).
void printLinkTable(std::ostream& os, const LinkTable& table);
// Path class, bandwidth and latency of each ring hop; the full class matrix for small jobs.
void printRankLinks(std::ostream& os, const JobTopo& job);

}  // namespace coll::tools
