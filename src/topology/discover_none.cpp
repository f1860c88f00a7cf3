// Discovery when the library is built without hwloc: only the host name and the CPU
// count are known, so ranks can still be grouped by host (COLL_HOST_ID or hostname).
#include <unistd.h>

#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "topology/topology.hpp"

namespace coll {

COLL_PARAM(kTopoFile, "COLL_TOPO_FILE", "", "hwloc XML topology to use instead of discovering this machine");
COLL_PARAM(kTopoDump, "COLL_TOPO_DUMP_FILE", "", "write the topology used as hwloc XML (%h host, %p pid)");

HostTopo loadXml(const std::string& path) {
  COLL_THROW(collInvalidUsage, "topology: cannot load '", path, "': libcollective was built without hwloc");
}

HostTopo discoverLocal(const Config& cfg) {
  HostTopo t;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  t.hostname = host;
  t.source = "none (built without hwloc)";
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  t.pus = n > 0 ? static_cast<int>(n) : 0;
  if (!cfg.getStr(kTopoFile).empty())
    COLL_WARN("%s=%s ignored: libcollective was built without hwloc", kTopoFile, cfg.getStr(kTopoFile).c_str());
  if (!cfg.getStr(kTopoDump).empty())
    COLL_WARN("%s ignored: libcollective was built without hwloc", kTopoDump);
  COLL_INFO("topology: built without hwloc, ranks are grouped by host only (no NUMA, GPU or NIC locality)");
  return t;
}

}  // namespace coll
