// collective-info end to end: standalone on a stored topology, a bad file, and a job of
// 4 ranks on 2 simulated hosts (COLL_HOST_ID) under collectiverun.
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <string>
#include <utility>
#include <vector>

#include "coll_config.h"
#include "../shell_util.hpp"
#include "topo_test_util.hpp"
#include "topology/topology.hpp"

namespace coll {
namespace {

using test::dataFile;

using Result = testshell::Result;
// Runs a shell command, capturing stdout and stderr together.
inline Result shell(const std::string& cmd) { return testshell::run(cmd); }

bool has(const Result& r, const std::string& s) { return r.out.find(s) != std::string::npos; }

TEST(TopoTool, HelpAndBadArguments) {
  Result help = shell(std::string(COLL_INFO_EXE) + " --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_TRUE(has(help, "usage: collective-info")) << help.out;
  Result bad = shell(std::string(COLL_INFO_EXE) + " --bogus");
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(has(bad, "unknown argument '--bogus'")) << bad.out;
  for (const char* counts : {"8,x", "8,,16", "0", "-4"}) {
    Result r = shell(std::string(COLL_INFO_EXE) + " --standalone --counts " + counts);
    EXPECT_EQ(r.status, 2) << counts;
    EXPECT_TRUE(has(r, "is not a positive element count")) << r.out;
  }
  // An option without its value was called unknown.
  for (const char* opt : {"--topo", "--counts"}) {
    Result r = shell(std::string(COLL_INFO_EXE) + " --standalone " + opt);
    EXPECT_EQ(r.status, 2) << opt;
    EXPECT_TRUE(has(r, std::string(opt) + " needs a value")) << r.out;
  }
  // Counts beyond size_t (or whose float32 bytes are) wrapped silently.
  for (const char* counts : {"99999999999999999999999", "4611686018427387904"}) {
    Result r = shell(std::string(COLL_INFO_EXE) + " --standalone --counts " + counts);
    EXPECT_EQ(r.status, 2) << counts;
    EXPECT_TRUE(has(r, std::string("--counts: '") + counts + "' is too large")) << r.out;
  }
}

// --simulate prices a job it does not run; its bad counts are refused with the reason.
TEST(TopoTool, SimulateBadArguments) {
  const std::pair<const char*, const char*> cases[] = {
      {"--simulate 0", "--simulate: '0' is not a count from 1 to"},
      {"--simulate x", "--simulate: 'x' is not a count from 1 to"},
      {"--simulate 4 --hosts 5", "--hosts: 5 hosts for 4 ranks (it must be 1 to the number of ranks)"},
      {"--simulate 999999999", "--simulate: '999999999' is not a count"},
      {"--hosts 2", "--hosts goes with --simulate NRANKS"},
      {"--simulate", "--simulate needs a value"}};
  for (const auto& [args, why] : cases) {
    Result r = shell(std::string(COLL_INFO_EXE) + " " + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.out;
    EXPECT_TRUE(has(r, why)) << args << ": " << r.out;
  }
}

#if COLL_HAVE_HWLOC

// A job of 4096 GPUs on 512 HGX hosts, priced without running it: every collective gets
// an algorithm and a time, and the hierarchical all-reduce is among the alternatives.
TEST(TopoTool, SimulateThousandsOfRanks) {
  Result r = shell(std::string(COLL_INFO_EXE) + " --simulate 4096 --hosts 512 --gpus-by-local-rank --topo " +
                   dataFile("hgx_h100_roce.xml") + " --counts 1,1048576");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r, "simulated job: 4096 ranks on 512 hosts (8 per host)")) << r.out;
  for (const char* kind : {"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather",
                           "scatter"})
    EXPECT_TRUE(has(r, std::string("\n  ") + kind + " ")) << kind << ": " << r.out;
  EXPECT_TRUE(has(r, "\n  hier ")) << r.out;
  EXPECT_TRUE(has(r, "\n  ring ")) << r.out;
  // One host: the hierarchical all-reduce cannot run.
  Result one = shell(std::string(COLL_INFO_EXE) + " --simulate 8 --topo " + dataFile("hgx_h100_roce.xml") +
                     " --counts 1");
  ASSERT_EQ(one.status, 0) << one.out;
  EXPECT_TRUE(has(one, "simulated job: 8 ranks on 1 hosts (8 per host)")) << one.out;
  const size_t hier = one.out.find("\n  hier ");
  ASSERT_NE(hier, std::string::npos) << one.out;
  const std::string row = one.out.substr(hier + 1, one.out.find('\n', hier + 1) - hier - 1);
  EXPECT_EQ(row.back(), '-') << row;
}

TEST(TopoTool, StandaloneOnStoredTopology) {
  Result r = shell(std::string(COLL_INFO_EXE) + " --standalone --topo " + dataFile("gpu8_ib4.xml"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r, "host gpu-node-01")) << r.out;
  EXPECT_TRUE(has(r, "2 packages, 2 NUMA nodes, 32 cores, 64 hardware threads")) << r.out;
  EXPECT_TRUE(has(r, "gpu 0 0000:19:00.0 cuda0 \"NVIDIA A100 80GB PCIe\" numa 0, closest nic mlx5_0")) << r.out;
  EXPECT_TRUE(has(r, "nic 1 mlx5_0 (ib, ibp27s0) 0000:1b:00.0 numa 0, speed 200 Gb/s")) << r.out;
  EXPECT_TRUE(has(r, "  gpu0     self         nvlink       host-bridge  host-bridge  cross-socket")) << r.out;
  EXPECT_TRUE(has(r, "assumed link costs")) << r.out;
  EXPECT_TRUE(has(r, "this process:\njob: 1 ranks on 1 hosts")) << r.out;
}

// The communicator itself drives the GPUs COLL_RANK_GPU names (the tool prints its
// topology): without the tool's flag, local-rank puts GPU0 and GPU1 on each simulated
// host, joined by NVLink; a value it does not know fails every rank's start.
TEST(TopoTool, RankGpuFromTheEnvironment) {
  const std::string launch = std::string(COLLECTIVERUN_EXE) + " --timeout 50 --no-tag-output -np 4 -- sh -c '" +
                             "COLL_HOST_ID=sim$((COLL_RANK % 2)) exec " + COLL_INFO_EXE + " --topo " +
                             dataFile("gpu8_ib4.xml") + "'";
#if COLL_HAVE_HWLOC  // else --topo is ignored and the host has no GPUs
  Result r = shell("COLL_RANK_GPU=local-rank " + launch);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r, "     0 -> 2    nvlink          300.00 GB/s")) << r.out;
  EXPECT_TRUE(has(r, "0 0000:19:00.0 mlx5_0 ib (pci-switch)")) << r.out;
  EXPECT_TRUE(has(r, "1 0000:1a:00.0 mlx5_0 ib (pci-switch)")) << r.out;
  Result none = shell("COLL_RANK_GPU=none " + launch);
  ASSERT_EQ(none.status, 0) << none.out;
  EXPECT_FALSE(has(none, "0 -> 2    nvlink")) << none.out;
  EXPECT_TRUE(has(none, "     0 -> 2    ")) << none.out;
#endif
  Result bad = shell("COLL_RANK_GPU=gpu3 " + launch);
  EXPECT_NE(bad.status, 0) << bad.out;
  EXPECT_TRUE(has(bad, "COLL_RANK_GPU='gpu3': expected auto, local-rank or none")) << bad.out;
  Result alone = shell("COLL_RANK_GPU=gpu3 " + std::string(COLL_INFO_EXE) + " --standalone");
  EXPECT_EQ(alone.status, 2) << alone.out;
  EXPECT_TRUE(has(alone, "COLL_RANK_GPU='gpu3'")) << alone.out;
  EXPECT_FALSE(has(alone, "assumed link costs")) << "nothing printed before the error: " << alone.out;
  Result algo = shell("COLL_ALGO=allreduce:nosuch " + std::string(COLL_INFO_EXE) + " --standalone");
  EXPECT_EQ(algo.status, 2) << algo.out;
  EXPECT_TRUE(has(algo, "allreduce has no algorithm named 'nosuch'")) << algo.out;
}

// Hosts the library did not describe itself (topo_clusters.py's production shapes): what
// collective-info says about them alone, with this process pinned to CPU 0 (a CPU rank on
// each file's first NUMA node), and about a job of one rank per GPU on the POWER9 host.
TEST(TopoTool, ProductionShapes) {
  if (boundCpus().empty() || boundCpus()[0] != 0) GTEST_SKIP() << "CPU 0 is not ours to pin to";
  const std::vector<std::pair<const char*, std::vector<std::string>>> cases = {
      {"power9_v100_nvlink.xml",
       {"  gpu0     self         nvlink       cross-socket cross-socket", "paths GPU x NUMA:",
        "  gpu2     cross-socket nvlink", "numa 1 (os 252, package 0): memory only, GPUMemory of gpu 0 (0004:03:00.0)",
        "nic 1 enP5p1s0f0 (ethernet) 0005:01:00.0 numa 0", "-              mlx5_0 ib (numa)"}},
      {"epyc_ib_mgmt.xml",
       {"nic 1 mlx5_0 (ib, ib0) 0000:21:00.0 numa 1, speed unknown", "(os 4, package 1): memory only, CXL-DRAM",
        "  numa0    numa         package", "-              mlx5_0 ib (package)"}},
      {"xeon_opa_mgmt.xml", {"nic 1 hfi1_0 (opa, ib0) 0000:21:00.0 numa 1", "-              hfi1_0 opa (cross-socket)"}},
      {"epyc_slingshot_mgmt.xml",
       {"nic 1 cxi0 (slingshot, hsn0) 0000:21:00.0 numa 1", "-              cxi0 slingshot (cross-socket)"}},
      {"xeon_efa.xml", {"nic 0 ens5 (ethernet)", "nic 1 efa_0 (efa) 0000:21:00.0 numa 1", "efa_0 efa (cross-socket)"}},
      {"xeon_max_flat.xml",
       {"numa 1 (os 2, package 0): memory only, 64 GiB", "nic 1 mlx5_0 (ib, ibp129s0) 0000:81:00.0 numa 2",
        "-              mlx5_0 ib (cross-socket)"}},
      {"knl_flat_opa.xml",
       {"numa 0 (os 0, package 0): cpus 0-63, 96 GiB DRAM", "numa 1 (os 1, package 0): memory only, MCDRAM, 16 GiB",
        "nic 1 hfi1_0 (opa, ib0) 0000:11:00.0 numa 0", "-              hfi1_0 opa (numa)"}},
  };
  for (const auto& [file, lines] : cases) {
    Result r = shell("taskset -c 0 " + std::string(COLL_INFO_EXE) + " --standalone --topo " + dataFile(file));
    ASSERT_EQ(r.status, 0) << file << "\n" << r.out;
    for (const std::string& line : lines) EXPECT_TRUE(has(r, line)) << file << ": " << line << "\n" << r.out;
  }
  Result job = shell(std::string(COLLECTIVERUN_EXE) + " --timeout 50 --no-tag-output -np 4 " + COLL_INFO_EXE +
                     " --gpus-by-local-rank --topo " + dataFile("power9_v100_nvlink.xml"));
  ASSERT_EQ(job.status, 0) << job.out;
  for (const char* line : {"0 0004:03:00.0 mlx5_0 ib (numa)", "1 0004:04:00.0 mlx5_0 ib (numa)",
                           "2 0035:03:00.0 mlx5_1 ib (numa)", "3 0035:04:00.0 mlx5_1 ib (numa)", "ring order: 0 1 2 3",
                           "     0 -> 1    nvlink           75.00 GB/s", "     1 -> 2    cross-socket",
                           "     2 -> 3    nvlink           75.00 GB/s"})
    EXPECT_TRUE(has(job, line)) << line << "\n" << job.out;
  Result v3 = shell(std::string(COLL_INFO_EXE) + " --standalone --topo " + dataFile("epyc_ib_mgmt_v3.xml"));
  EXPECT_EQ(v3.status, 2) << v3.out;
  EXPECT_TRUE(has(v3, "is an hwloc XML version 3 file")) << v3.out;
  EXPECT_TRUE(has(v3, "'lstopo --of v2xml FILE.xml'")) << v3.out;
}

TEST(TopoTool, MissingTopologyFile) {
  Result r = shell(std::string(COLL_INFO_EXE) + " --standalone --topo /nonexistent/x.xml");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r, "COLL_TOPO_FILE: cannot read the hwloc XML file '/nonexistent/x.xml'")) << r.out;
}

#else

TEST(TopoTool, StandaloneWithoutHwloc) {
  Result r = shell(std::string(COLL_INFO_EXE) + " --standalone");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r, "no hwloc: packages, NUMA nodes and devices unknown")) << r.out;
}

#endif

TEST(TopoTool, JobOnTwoSimulatedHosts) {
  // Runs with or without hwloc (then --topo is ignored with a warning).
  // Ranks 0 and 2 claim host sim0, ranks 1 and 3 host sim1; each drives the GPU numbered
  // like its local rank on the stored 8-GPU server.
  std::string cmd = std::string(COLLECTIVERUN_EXE) + " --timeout 50 --no-tag-output -np 4 -- sh -c '" +
                    "COLL_HOST_ID=sim$((COLL_RANK % 2)) exec " + COLL_INFO_EXE + " --gpus-by-local-rank --topo " +
                    dataFile("gpu8_ib4.xml") + "'";
  Result r = shell(cmd);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r, "job: 4 ranks on 2 hosts")) << r.out;
  EXPECT_TRUE(has(r, "[sim0]: ranks 0 2; leader 0")) << r.out;
  EXPECT_TRUE(has(r, "[sim1]: ranks 1 3; leader 1")) << r.out;
  EXPECT_TRUE(has(r, "ring order: 0 2 1 3")) << r.out;
  EXPECT_TRUE(has(r, "algorithm selection (4 ranks")) << r.out;
  EXPECT_TRUE(has(r, "  allreduce ")) << r.out;
  // The table has exactly the asked columns; one element goes by recursive doubling.
  Result c = shell(std::string(COLLECTIVERUN_EXE) + " --timeout 50 --no-tag-output -np 2 " + COLL_INFO_EXE +
                   " --counts 1,67108864");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_TRUE(has(c, "  count                   1   67108864\n  allreduce              rd ")) << c.out;
  // Every all-reduce algorithm's estimate follows; the hierarchical one needs two hosts.
  EXPECT_TRUE(has(c, "all-reduce cost estimates (us;")) << c.out;
  EXPECT_TRUE(has(c, "\n  hier                    -          -\n")) << c.out;
  EXPECT_TRUE(has(c, "\n  rd         ")) << c.out;
  EXPECT_FALSE(has(r, "\n  hier                    -")) << r.out;
  EXPECT_TRUE(has(r, "\n  hier       ")) << r.out;
#if COLL_HAVE_HWLOC
  EXPECT_TRUE(has(r, "     0 -> 2    nvlink          300.00 GB/s")) << r.out;  // GPU0 - GPU1 on sim0
  EXPECT_TRUE(has(r, "     2 -> 1    network          25.00 GB/s")) << r.out;  // HDR InfiniBand
#else
  // Nothing known inside a host; between hosts, TCP over an unknown NIC.
  EXPECT_TRUE(has(r, "     0 -> 2    cross-socket      8.00 GB/s")) << r.out;
  EXPECT_TRUE(has(r, "     2 -> 1    network           1.25 GB/s")) << r.out;
#endif
}

}  // namespace
}  // namespace coll
