// gather_perf, scatter_perf and hypercube_perf (built from grouped collSend/collRecv
// calls; gather and scatter with --native 1 from collGather/collScatter) run as a user
// runs them, one rank per process under collectiverun: with -c 1 every output element is
// compared with its expected value, and a run passes only with exit 0 and "Out of bounds
// values : 0 OK". What they refuse (-g 1 without --native 1; a bad --native; hypercube
// on a rank count that is not a power of two, or with -m > 1) is an error message and
// exit status 2, not a crash or a hang. The tool paths come from meson (PERF_TOOL_DIR,
// COLLECTIVERUN).
#include <gtest/gtest.h>

#include <string>

#include "../shell_util.hpp"

namespace {

std::string tool(const std::string& name) { return std::string(PERF_TOOL_DIR) + "/" + name; }

testshell::Result runTool(int np, const std::string& name, const std::string& flags) {
  return testshell::run(std::string(COLLECTIVERUN) + " --timeout 60 -np " + std::to_string(np) +
                        " " + tool(name) + " " + flags);
}

const char kAllRight[] = "# Out of bounds values : 0 OK";
// 8 B .. 1 MiB by 8: blocks of 0 elements (8 bytes over 4 ranks) up to the large copies.
const char kSweep[] = "-c 1 -b 8 -e 1M -f 8 -n 3 -w 1";
// Every type at small sizes.
const char kTypes[] = "-c 1 -b 8 -e 4K -f 8 -n 1 -w 0 -d all";

void expectClean(int np, const std::string& name, const std::string& flags) {
  const testshell::Result r = runTool(np, name, flags);
  const std::string what = name + " -np " + std::to_string(np) + " " + flags;
  EXPECT_EQ(r.status, 0) << what << ":\n" << r.out;
  EXPECT_NE(r.out.find(kAllRight), std::string::npos) << what << ":\n" << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << what << ":\n" << r.out;
  // The header says which calls were timed.
  const bool native = flags.find("--native 1") != std::string::npos;
  EXPECT_EQ(r.out.find("# --native 1: timing the library's coll") != std::string::npos, native)
      << what << ":\n" << r.out;
}

// The job fails with exit status 2, says why, and never reaches a result table.
void expectRefused(const std::string& cmd, const std::string& why) {
  const testshell::Result r = testshell::run(cmd);
  EXPECT_NE(r.status, 0) << cmd << ":\n" << r.out;
  EXPECT_NE(r.out.find(why), std::string::npos) << cmd << ":\n" << r.out;
  EXPECT_EQ(r.out.find("Out of bounds values"), std::string::npos) << cmd << ":\n" << r.out;
}

}  // namespace

TEST(PerfGrouped, Gather) {
  expectClean(2, "gather_perf", kSweep);
  expectClean(2, "gather_perf", std::string(kTypes) + " -r 1");
  expectClean(3, "gather_perf", std::string(kSweep) + " -r all");
  // Buffers from collMemAlloc: the root's receives land in mapped memory.
  expectClean(3, "gather_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1 -R 1 -r 2");
  // -m 2: two gathers in one group, the root's two sends to itself paired in order.
  expectClean(3, "gather_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1 -m 2");
}

TEST(PerfGrouped, Scatter) {
  expectClean(2, "scatter_perf", kSweep);
  expectClean(2, "scatter_perf", std::string(kTypes) + " -r 1");
  expectClean(3, "scatter_perf", std::string(kSweep) + " -r all");
  expectClean(3, "scatter_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1 -R 1 -r 1");
  expectClean(3, "scatter_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1 -m 2");
}

// --native 1: the library's collGather/collScatter, every element checked, out of place
// and in place (the runner does both), on 1 to 4 ranks, every root, every type.
TEST(PerfGrouped, NativeGather) {
  const std::string native = " --native 1";
  expectClean(1, "gather_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1" + native);
  expectClean(2, "gather_perf", kSweep + native);
  expectClean(2, "gather_perf", std::string(kTypes) + " -r 1" + native);
  expectClean(3, "gather_perf", std::string(kSweep) + " -r all" + native);
  expectClean(4, "gather_perf", std::string(kSweep) + " -r 3" + native);
  expectClean(3, "gather_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1 -R 1 -r 2" + native);
  // -m 2: two collGather calls in one group.
  expectClean(3, "gather_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1 -m 2" + native);
}

TEST(PerfGrouped, NativeScatter) {
  const std::string native = " --native 1";
  expectClean(1, "scatter_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1" + native);
  expectClean(2, "scatter_perf", kSweep + native);
  expectClean(2, "scatter_perf", std::string(kTypes) + " -r 1" + native);
  expectClean(3, "scatter_perf", std::string(kSweep) + " -r all" + native);
  expectClean(4, "scatter_perf", std::string(kSweep) + " -r 2" + native);
  expectClean(3, "scatter_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1 -R 1 -r 1" + native);
  expectClean(3, "scatter_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1 -m 2" + native);
}

TEST(PerfGrouped, Hypercube) {
  expectClean(1, "hypercube_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1");
  expectClean(2, "hypercube_perf", kSweep);
  expectClean(4, "hypercube_perf", kSweep);
  expectClean(4, "hypercube_perf", kTypes);
  expectClean(4, "hypercube_perf", "-c 1 -b 8 -e 64K -f 8 -n 2 -w 1 -R 1");
}

// 3 ranks: every rank refuses after joining the job (the count is known only then), so
// none waits for the others; rank 0 says why.
TEST(PerfGrouped, HypercubeRefusesThreeRanks) {
  expectRefused(std::string(COLLECTIVERUN) + " --timeout 60 -np 3 " + tool("hypercube_perf") +
                    " -b 8 -e 64K",
                "hypercube_perf: hypercube needs a power-of-two number of ranks (1, 2, 4, 8, ...), not 3");
}

// Refused before joining any job (no launcher environment at all): nothing waits.
TEST(PerfGrouped, UsageRefusals) {
  for (const char* name : {"gather_perf", "scatter_perf", "hypercube_perf"}) {
    for (const char* flag : {"-g 1", "--ngpus=1"}) {
      const std::string cmd = "env -u COLL_RANK -u COLL_SIZE " + tool(name) + " " + flag;
      expectRefused(cmd, std::string(name) + ": -g 1: not supported by ");
      const testshell::Result r = testshell::run(cmd);
      EXPECT_EQ(r.status, 2) << cmd << ":\n" << r.out;
      EXPECT_EQ(r.out.find("collCommInitFromEnv"), std::string::npos) << r.out;
    }
  }
  const std::string cmd = "env -u COLL_RANK -u COLL_SIZE " + tool("hypercube_perf") + " -m 2";
  expectRefused(cmd, "hypercube_perf: -m 2: not supported by hypercube");
  EXPECT_EQ(testshell::run(cmd).status, 2);
  // --native: 0 or 1, and only where there is a native call to time.
  for (const char* name : {"gather_perf", "scatter_perf"}) {
    for (const char* flag : {"--native 2", "--native=yes", "--native -1"}) {
      const std::string bad = "env -u COLL_RANK -u COLL_SIZE " + tool(name) + " " + flag;
      expectRefused(bad, std::string(name) + ": invalid value ");
      EXPECT_EQ(testshell::run(bad).status, 2) << bad;
    }
  }
  for (const char* name : {"hypercube_perf", "all_reduce_perf", "reduce_perf", "alltoall_perf"}) {
    const std::string other = "env -u COLL_RANK -u COLL_SIZE " + tool(name) + " --native 1";
    expectRefused(other, std::string(name) + ": --native 1: not supported by ");
    EXPECT_EQ(testshell::run(other).status, 2) << other;
  }
  // A root outside the job, as for broadcast and reduce.
  expectRefused(std::string(COLLECTIVERUN) + " --timeout 60 -np 2 " + tool("gather_perf") + " -r 2",
                "-r 2 is not a rank of 2");
  expectRefused(std::string(COLLECTIVERUN) + " --timeout 60 -np 2 " + tool("scatter_perf") + " -r 5",
                "-r 5 is not a rank of 2");
  expectRefused(std::string(COLLECTIVERUN) + " --timeout 60 -np 2 " + tool("gather_perf") +
                    " --native 1 -r 2",
                "-r 2 is not a rank of 2");
}
