// Human-readable text for topologies (collective-info, COLL_DEBUG=INFO).
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>

#include "topology/job.hpp"
#include "topology/topology.hpp"

namespace coll {
namespace {

// "100 Gb/s", "1 Gb/s", "500 Mb/s".
std::string speedText(uint64_t mbps) {
  return mbps >= 1000 && mbps % 1000 == 0 ? std::to_string(mbps / 1000) + " Gb/s"
                                          : std::to_string(mbps) + " Mb/s";
}

std::string bytesText(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof buf, "%.3g %s", v, units[u]);
  return buf;
}

std::string locText(const HostTopo& t, Locality l) {
  if (l.numa >= 0) return "numa " + std::to_string(l.numa);
  if (l.package >= 0) return "package " + std::to_string(l.package);
  return t.detailed ? "machine" : "?";
}

std::string gbsText(double gbs) {
  char buf[32];
  snprintf(buf, sizeof buf, "%g GB/s", gbs);
  return buf;
}

// "  numa 0 (os 0, package 0): cpus 0-15,32-47, 256 GiB" or, for memory only,
// "  numa 2 (os 252, package 0): memory only, GPUMemory of gpu 0 (0004:04:00.0), 16 GiB".
std::string numaLine(const HostTopo& t, int i) {
  const NumaInfo& n = t.numas[i];
  std::ostringstream os;
  os << "  numa " << i << " (os " << n.osIndex << ", "
     << (n.package >= 0 ? "package " + std::to_string(n.package) : std::string("machine")) << "): ";
  if (!n.memoryOnly()) {
    os << "cpus " << cpuListString(n.cpus) << ", " << bytesText(n.memBytes) << (n.kind.empty() ? "" : " " + n.kind);
    return os.str() + "\n";
  }
  os << "memory only" << (n.kind.empty() ? "" : ", " + n.kind);
  if (!n.gpuBusId.empty()) {
    int gpu = -1;
    for (size_t g = 0; g < t.gpus.size(); ++g)
      if (t.gpus[g].busId == n.gpuBusId) gpu = static_cast<int>(g);
    os << " of " << (gpu >= 0 ? "gpu " + std::to_string(gpu) + " (" + n.gpuBusId + ")" : "GPU " + n.gpuBusId);
  }
  os << ", " << bytesText(n.memBytes) << "\n";
  return os.str();
}

std::string pciText(const std::vector<PciHop>& path, double linkGBs) {
  std::ostringstream os;
  for (size_t i = 0; i < path.size(); ++i) os << (i ? " > " : "") << path[i].label;
  if (path.empty()) os << "-";
  if (linkGBs > 0) os << " (device link " << std::fixed << std::setprecision(1) << linkGBs << " GB/s)";
  return os.str();
}

// One row of class names; `cols` are the column devices.
void classRow(std::ostringstream& os, const HostTopo& t, const std::string& label, DevRef from,
              const std::vector<DevRef>& cols) {
  char buf[32];
  snprintf(buf, sizeof buf, "  %-8s", label.c_str());
  os << buf;
  for (DevRef c : cols) {
    snprintf(buf, sizeof buf, " %-12s", pathClassName(classify(t, from, c)));
    os << buf;
  }
  os << "\n";
}

void classHeader(std::ostringstream& os, const char* prefix, const std::vector<std::string>& names) {
  char buf[32];
  os << "          ";
  for (const std::string& n : names) {
    snprintf(buf, sizeof buf, " %-12s", (prefix + n).c_str());
    os << buf;
  }
  os << "\n";
}

}  // namespace

std::string cpuListString(const std::vector<int>& cpus) {
  std::ostringstream os;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    os << (i ? "," : "") << cpus[i];
    if (j > i) os << "-" << cpus[j];
    i = j + 1;
  }
  return os.str();
}

uint64_t parseIbRateMbps(const std::string& text) {
  char* end = nullptr;
  double v = strtod(text.c_str(), &end);
  if (end == text.c_str() || v <= 0) return 0;
  std::string unit(end);
  if (unit.rfind(" Gb/sec", 0) == 0) return static_cast<uint64_t>(v * 1000);
  if (unit.rfind(" Mb/sec", 0) == 0) return static_cast<uint64_t>(v);
  return 0;
}

std::string describeHost(const HostTopo& t) {
  std::ostringstream os;
  os << "host " << t.hostname << " (topology from " << t.source << ")\n";
  if (!t.detailed) {
    os << "  " << t.pus << " CPUs; no hwloc: packages, NUMA nodes and devices unknown\n";
    return os.str();
  }
  os << "  " << t.packages.size() << " packages, " << t.numas.size() << " NUMA nodes, " << t.cores
     << " cores, " << t.pus << " hardware threads\n";
  for (size_t i = 0; i < t.packages.size(); ++i)
    os << "  package " << i << ": " << t.packages[i].cores << " cores, cpus "
       << cpuListString(t.packages[i].cpus) << (t.packages[i].model.empty() ? "" : ", ")
       << t.packages[i].model << "\n";
  for (size_t i = 0; i < t.numas.size(); ++i) os << numaLine(t, static_cast<int>(i));
  for (const CacheInfo& c : t.caches)
    os << "  L" << c.level << " " << c.type << " " << bytesText(c.bytes) << " x " << c.count << "\n";
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    const GpuInfo& g = t.gpus[i];
    os << "  gpu " << i << " " << g.busId << " " << (g.name.empty() ? "-" : g.name) << " "
       << (g.model.empty() ? "" : "\"" + g.model + "\" ") << locText(t, g.loc) << ", closest nic "
       << (g.closestNic >= 0 ? t.nics[g.closestNic].name : "-");
    if (g.hostNvlinkGBs > 0)
      os << ", nvlink to " << (g.hostNvlinkPackage >= 0 ? "package " + std::to_string(g.hostNvlinkPackage) : "cpu")
         << " " << gbsText(g.hostNvlinkGBs);
    os << "\n      pci: " << pciText(g.pciPath, g.pciLinkGBs) << "\n";
  }
  for (size_t i = 0; i < t.nics.size(); ++i) {
    const NicInfo& n = t.nics[i];
    os << "  nic " << i << " " << n.name << " (" << nicKindName(n.kind)
       << (n.netdev.empty() || n.netdev == n.name ? "" : ", " + n.netdev) << ") " << n.busId << " "
       << locText(t, n.loc) << ", speed "
       << (n.speedMbps ? speedText(n.speedMbps) : std::string("unknown"))
       << "\n      pci: " << pciText(n.pciPath, n.pciLinkGBs) << "\n";
  }
  if (t.gpus.empty()) os << "  no GPUs\n";
  if (t.nics.empty()) os << "  no NICs\n";
  return os.str();
}

std::string describePaths(const HostTopo& t) {
  std::ostringstream os;
  std::vector<DevRef> gpus, nics;
  std::vector<std::string> gpuNames, nicNames;
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    gpus.push_back(DevRef::gpu(static_cast<int>(i)));
    gpuNames.push_back(std::to_string(i));
  }
  for (size_t i = 0; i < t.nics.size(); ++i) {
    nics.push_back(DevRef::nic(static_cast<int>(i)));
    nicNames.push_back(t.nics[i].name);
  }
  if (!gpus.empty()) {
    os << "paths GPU x GPU:\n";
    classHeader(os, "gpu", gpuNames);
    for (size_t i = 0; i < gpus.size(); ++i) classRow(os, t, "gpu" + gpuNames[i], gpus[i], gpus);
  }
  // Where ranks' CPU memory can be: the NUMA nodes with CPUs.
  std::vector<DevRef> numas;
  std::vector<std::string> numaNames;
  for (size_t i = 0; i < t.numas.size(); ++i)
    if (!t.numas[i].memoryOnly()) {
      numas.push_back(DevRef::numa(static_cast<int>(i)));
      numaNames.push_back(std::to_string(i));
    }
  if (!gpus.empty() && !numas.empty()) {  // host staging: PCIe, or NVLink to the CPU on POWER
    os << "paths GPU x NUMA:\n";
    classHeader(os, "numa", numaNames);
    for (size_t i = 0; i < gpus.size(); ++i) classRow(os, t, "gpu" + gpuNames[i], gpus[i], numas);
  }
  if (!nics.empty()) {
    os << "paths to NICs:\n";
    classHeader(os, "", nicNames);
    for (size_t i = 0; i < gpus.size(); ++i) classRow(os, t, "gpu" + gpuNames[i], gpus[i], nics);
    for (size_t i = 0; i < numas.size(); ++i) classRow(os, t, "numa" + numaNames[i], numas[i], nics);
  }
  return os.str();
}

std::string describeJob(const JobTopo& job) {
  std::ostringstream os;
  os << "job: " << job.nranks() << " ranks on " << job.nhosts() << " hosts\n";
  for (int h = 0; h < job.nhosts(); ++h) {
    const HostGroup& g = job.hosts()[h];
    os << "  host " << h << " " << g.hostname << " [" << g.hostId << "]: ranks";
    for (int r : g.ranks) os << " " << r;
    os << "; leader " << g.leader << "\n";
  }
  os << "  rank host local pid      cpus(package/numa) gpu            nic (path)\n";
  char buf[256];
  for (int r = 0; r < job.nranks(); ++r) {
    const RankPlacement& p = job.placement(r);
    std::string nic = "-";
    if (p.nic >= 0)
      nic = std::string(p.nicName) + " " + nicKindName(static_cast<NicKind>(p.nicKind)) + " (" +
            pathClassName(static_cast<PathClass>(p.nicPath)) + ")";
    else if (p.nicName[0])
      nic = std::string(p.nicName) + " (interface)";
    if (p.nicSpeedMbps) nic += " " + speedText(p.nicSpeedMbps);
    snprintf(buf, sizeof buf, "  %4d %4d %5d %-8d %3d/%-3d (cpu %-4d)   %-14s %s\n", r, job.hostOf(r),
             job.localRank(r), p.pid, p.package, p.numa, p.firstCpu,
             p.gpu < 0 ? "-" : (std::to_string(p.gpu) + " " + p.gpuBusId).c_str(), nic.c_str());
    os << buf;
  }
  os << "  ring order:";
  for (int r : ringOrder(job)) os << " " << r;
  os << "\n";
  return os.str();
}

}  // namespace coll
