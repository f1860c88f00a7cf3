#include "tools/info_print.hpp"

#include <cstdio>

#include "comm/comm.hpp"
#include "base/error.hpp"
#include "transport/net/net_backend.hpp"

namespace coll::tools {
namespace {

// Short column labels for the pair matrix (NCCL's names where they exist).
const char* shortName(PathClass c) {
  static const char* names[kNumPathClasses] = {"self", "NVL", "PIX", "PHB", "NUMA", "PKG", "SYS", "NET"};
  return names[static_cast<int>(c)];
}

void linkLine(std::ostream& os, const char* name, const LinkCost& c, bool userBw, bool userLat) {
  char buf[128];
  snprintf(buf, sizeof buf, "  %-13s %8.2f%s %9.2f%s\n", name, c.bwGBs, userBw ? "*" : " ", c.latUs,
           userLat ? "*" : " ");
  os << buf;
}

}  // namespace

void printNetBackend(std::ostream& os, const Config& cfg) {
  std::string why;
  const net::Backend* b = nullptr;
  try {
    b = net::backendFor(cfg, &why);
  } catch (const Error& e) {
    why = e.what();
  }
  if (!b) {
    os << "network backend: none (" << why << "); ranks on other hosts use tcp\n";
    return;
  }
  os << "network backend: " << b->name << ", " << b->devices.size() << " device(s):\n";
  for (const auto& d : b->devices) {
    char buf[320];
    snprintf(buf, sizeof buf, "  %-20s %8d Mbps  %6.2f us  pci %s  %d requests\n", d.name, d.speedMbps, d.latencyUs,
             d.pciPath[0] ? d.pciPath : "?", d.maxRequests);
    os << buf;
  }
}

void printTransports(std::ostream& os, Comm& comm) {
  os << "transports of rank " << comm.rank() << ":";
  for (int p = 0; p < comm.nranks(); ++p)
    if (p != comm.rank()) os << " " << p << ":" << comm.transportOf(p);
  os << "\n";
}

void printLinkTable(std::ostream& os, const LinkTable& t) {
  os << "assumed link costs (class, GB/s, latency us; * = set by COLL_TOPO_LINK_BW/_LAT):\n";
  for (int i = 0; i < kNumPathClasses; ++i)
    linkLine(os, pathClassName(static_cast<PathClass>(i)), t.byClass[i], t.userBw[i], t.userLat[i]);
  linkLine(os, "ethernet", t.ethernet, t.userBw[kNumPathClasses], t.userLat[kNumPathClasses]);
  os << "  (pairs use hwloc's NVLink bandwidth and the slower NIC's speed where known)\n";
}

void printRankLinks(std::ostream& os, const JobTopo& job) {
  char buf[160];
  std::vector<int> ring = ringOrder(job);
  int n = job.nranks();
  os << "ring hops:\n";
  for (int i = 0; i < n && n > 1; ++i) {
    int a = ring[i], b = ring[(i + 1) % n];
    RankLink l = job.link(a, b);
    snprintf(buf, sizeof buf, "  %4d -> %-4d %-13s %8.2f GB/s %8.2f us\n", a, b, pathClassName(l.cls), l.bwGBs,
             l.latUs);
    os << buf;
  }
  if (n > 16 || n < 2) return;
  os << "path classes between ranks:\n     ";
  for (int b = 0; b < n; ++b) {
    snprintf(buf, sizeof buf, " %5d", b);
    os << buf;
  }
  os << "\n";
  for (int a = 0; a < n; ++a) {
    snprintf(buf, sizeof buf, "  %3d", a);
    os << buf;
    for (int b = 0; b < n; ++b) {
      snprintf(buf, sizeof buf, " %5s", shortName(job.pathClass(a, b)));
      os << buf;
    }
    os << "\n";
  }
}

}  // namespace coll::tools
