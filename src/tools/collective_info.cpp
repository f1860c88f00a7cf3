// collective-info: prints what libcollective knows about the machine and the job.
//
//   collective-info [--topo FILE.xml] [--gpus-by-local-rank] [--standalone] [--counts N,N,...]
//   collective-info --simulate NRANKS --hosts H [--topo FILE.xml] [--gpus-by-local-rank] [--counts ...]
//
// Alone it describes this machine (or the hwloc XML in --topo / COLL_TOPO_FILE): the
// topology, the path classes between GPUs and NICs, and the assumed cost of each class.
// Under collectiverun or mpirun (COLL_SIZE or OMPI_COMM_WORLD_SIZE set) the ranks form a
// communicator, exchange their placements, and rank 0 also prints the hosts, leaders,
// every rank's placement, the ring order and the algorithm chosen per collective and size.
// With --simulate it prices a job it does not run (tools/simulate.hpp).
#include <stdexcept>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "collective.h"
#include "base/config.hpp"
#include "base/error.hpp"
#include "comm/handles.hpp"
#include "tools/algo_report.hpp"
#include "tools/info_print.hpp"
#include "tools/simulate.hpp"
#include "topology/exchange.hpp"
#include "topology/job.hpp"
#include "tuning/select.hpp"

namespace {

struct Args {
  bool standalone = false;
  bool help = false;
  std::vector<size_t> counts;  // of the algorithm table; empty: the default set
  int simulate = 0;            // --simulate NRANKS (0: not asked)
  int hosts = 0;               // --hosts H
};

const char* kUsage =
    "usage: collective-info [--topo FILE.xml] [--gpus-by-local-rank] [--standalone] [--counts N,N,...]\n"
    "  --topo FILE           describe the machine in this hwloc XML file (sets COLL_TOPO_FILE)\n"
    "  --gpus-by-local-rank  give each rank the GPU numbered like its local rank (modulo the\n"
    "                        host's GPUs), as a one-GPU-per-rank launch would (COLL_RANK_GPU=local-rank)\n"
    "  --standalone          do not join a job even when launched by collectiverun or mpirun\n"
    "  --counts N,N,...      float32 counts of the algorithm table (default 1 to 256 Mi)\n"
    "  --simulate NRANKS     do not join a job: price a job of NRANKS ranks over --hosts H\n"
    "                        hosts shaped like this machine (or --topo FILE) and print the\n"
    "                        algorithm the selector picks per size with the predicted time\n"
    "  --hosts H             hosts of the simulated job (1 to NRANKS; default 1)\n"
    "Environment: COLL_TOPO_FILE, COLL_TOPO_DUMP_FILE, COLL_HOST_ID, COLL_RANK_GPU, COLL_TOPO_LINK_BW/_LAT.\n";

std::vector<size_t> parseCounts(const std::string& list) {
  std::vector<size_t> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || item[0] == '-' || v == 0)
      COLL_THROW(collInvalidArgument, "--counts: '", item, "' is not a positive element count");
    // strtoull saturates, and the float32 byte count must fit size_t too.
    if (errno == ERANGE || v > SIZE_MAX / sizeof(float))
      COLL_THROW(collInvalidArgument, "--counts: '", item, "' is too large (at most ", SIZE_MAX / sizeof(float),
                 " float32 elements)");
    out.push_back(static_cast<size_t>(v));
  }
  return out;
}

int parsePositive(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < 1 || v > coll::tools::kMaxSimulatedRanks)
    COLL_THROW(collInvalidArgument, flag, ": '", text, "' is not a count from 1 to ", coll::tools::kMaxSimulatedRanks);
  return static_cast<int>(v);
}

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--help" || s == "-h") a.help = true;
    else if (s == "--standalone") a.standalone = true;
    else if (s == "--gpus-by-local-rank") setenv("COLL_RANK_GPU", "local-rank", 1);  // the communicator's too
    else if ((s == "--topo" || s == "--counts" || s == "--simulate" || s == "--hosts") && i + 1 == argc)
      COLL_THROW(collInvalidArgument, s, " needs a value\n", kUsage);
    else if (s == "--topo") setenv("COLL_TOPO_FILE", argv[++i], 1);
    else if (s == "--counts") a.counts = parseCounts(argv[++i]);
    else if (s == "--simulate") a.simulate = parsePositive(s, argv[++i]);
    else if (s == "--hosts") a.hosts = parsePositive(s, argv[++i]);
    else COLL_THROW(collInvalidArgument, "unknown argument '", s, "'\n", kUsage);
  }
  if (a.hosts && !a.simulate) COLL_THROW(collInvalidArgument, "--hosts goes with --simulate NRANKS\n", kUsage);
  return a;
}

bool launchedAsJob() { return getenv("COLL_SIZE") || getenv("OMPI_COMM_WORLD_SIZE"); }

// This process as rank 0 of a job of its own, with the GPU COLL_RANK_GPU gives local rank
// 0 (the tool makes no device current, so "auto" gives none).
coll::PlacementInput standaloneInput(const coll::HostTopo& topo, const coll::Config& cfg) {
  coll::PlacementInput in;
  in.hostId = coll::localHostId();
  in.hostname = topo.hostname;
  in.pid = static_cast<int>(getpid());
  in.cpus = coll::boundCpus();
  in.gpu = coll::rankGpu(topo, cfg.getStr("COLL_RANK_GPU"), 0, "");
  return in;
}

void printHost(std::ostream& os, const coll::HostTopo& topo, const coll::LinkTable& table) {
  os << coll::describeHost(topo) << coll::describePaths(topo);
  coll::tools::printLinkTable(os, table);
}

int runStandalone(const coll::Config& cfg) {
  coll::Selector check(cfg);  // a bad COLL_ALGO is reported here as it would be in a job
  coll::HostTopo topo = coll::discoverLocal(cfg);
  coll::LinkTable table = coll::LinkTable::fromConfig(cfg);
  coll::JobTopo job({coll::makePlacement(topo, standaloneInput(topo, cfg))}, table);
  printHost(std::cout, topo, table);
  coll::tools::printNetBackend(std::cout, cfg);
  std::cout << "this process:\n" << coll::describeJob(job);
  return 0;
}

// The communicator's own view of the job: the one its algorithm choices come from.
void printJob(const Args& a, const coll::Config& cfg, collComm_t handle) {
  coll::Comm& comm = *coll::liveComm(handle).impl;
  coll::HostTopo topo = coll::discoverLocal(cfg);
  coll::LinkTable table = coll::LinkTable::fromConfig(cfg);
  const coll::JobTopo& job = comm.topology();
  if (comm.rank() == 0) {
    std::ostringstream os;
    os << "(topology of rank 0's host)\n";
    printHost(os, topo, table);
    coll::tools::printNetBackend(os, cfg);
    os << coll::describeJob(job);
    coll::tools::printTransports(os, comm);
    coll::tools::printRankLinks(os, job);
    coll::tools::printAlgorithmChoices(os, handle, a.counts);
    std::cout << os.str() << std::flush;
  }
}

int runJob(const Args& a, const coll::Config& cfg) {
  collComm_t comm = nullptr;
  if (collCommInitFromEnv(&comm) != collSuccess) {
    fprintf(stderr, "collective-info: joining the job failed: %s\n", collGetLastError(nullptr));
    return 1;
  }
  // Any failure past this point must not leave the other ranks waiting for this one.
  try {
    printJob(a, cfg, comm);
    // Rank 0's process hosts the bootstrap root: it must not exit while another rank is
    // still collecting the topology exchange from it.
    if (collBarrier(comm) != collSuccess)
      throw std::runtime_error(std::string("final barrier: ") + collGetLastError(comm));
  } catch (...) {
    collCommAbort(comm);
    throw;
  }
  collCommDestroy(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parseArgs(argc, argv);
    if (a.help) {
      std::cout << kUsage;
      return 0;
    }
    coll::Config cfg = coll::Config::fromEnv();
    if (a.simulate) {
      coll::Selector check(cfg);  // a bad COLL_ALGO is reported as it would be in a job
      coll::tools::printSimulation(std::cout, coll::discoverLocal(cfg), cfg,
                                   {a.simulate, a.hosts ? a.hosts : 1, a.counts});
      return 0;
    }
    return a.standalone || !launchedAsJob() ? runStandalone(cfg) : runJob(a, cfg);
  } catch (const coll::Error& e) {
    fprintf(stderr, "collective-info: %s\n", e.what());
    return e.code() == collInvalidArgument ? 2 : 1;
  }
}
