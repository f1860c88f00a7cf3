// The Open MPI peer benchmark (perf/peers/mpi_allreduce_bench) and the scripts that run
// it beside our tools (perf/compare_collectives.sh, perf/compare_allreduce.sh), as a user
// runs them. The peer checks
// every element of its output like our tools do, so a run passes only with exit 0 and
// "Out of bounds values : 0 OK"; its refusals are a message and exit status 2. Paths come
// from meson (MPI_BENCH, COMPARE_SCRIPT, COMPARE_ALLREDUCE, BUILD_DIR). Skipped without mpirun.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "../shell_util.hpp"

namespace {

bool haveMpirun() { return testshell::run("command -v mpirun").status == 0; }

testshell::Result runBench(int np, const std::string& flags) {
  return testshell::run("mpirun --allow-run-as-root --oversubscribe --bind-to none -np " +
                        std::to_string(np) + " " + MPI_BENCH + " " + flags);
}

// The result rows of a table: the whitespace-separated fields of each line that starts
// with a size.
std::vector<std::vector<std::string>> rows(const std::string& out) {
  std::vector<std::vector<std::string>> all;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> row;
    for (std::string f; fields >> f;) row.push_back(f);
    if (!row.empty() && row[0].find_first_not_of("0123456789") == std::string::npos)
      all.push_back(row);
  }
  return all;
}

struct Coll {
  const char* flag;     // --coll value
  const char* mpiName;  // named in the header
  bool rooted;
};
const Coll kColls[] = {
    {"allreduce", "MPI_Allreduce", false}, {"allgather", "MPI_Allgather", false},
    {"bcast", "MPI_Bcast", true},          {"reducescatter", "MPI_Reduce_scatter_block", false},
    {"reduce", "MPI_Reduce", true},        {"alltoall", "MPI_Alltoall", false},
    {"gather", "MPI_Gather", true},        {"scatter", "MPI_Scatter", true},
};

}  // namespace

// Every call on 2 and 3 ranks (3: counts that do not split evenly), 8 B (blocks of one
// or zero elements) to 256 KiB, every element checked; the rooted calls at root 1 on 3.
TEST(PerfMpiBench, EveryCollectiveChecked) {
  if (!haveMpirun()) GTEST_SKIP() << "mpirun is not installed";
  for (const Coll& c : kColls) {
    for (int np : {2, 3}) {
      std::string flags = std::string("--coll ") + c.flag + " -b 8 -e 1M -f 8 -n 2 -w 1";
      if (c.rooted && np == 3) flags += " -r 1";
      const testshell::Result r = runBench(np, flags);
      const std::string what = std::string(c.flag) + " -np " + std::to_string(np);
      EXPECT_EQ(r.status, 0) << what << ":\n" << r.out;
      EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << what << ":\n"
                                                                                 << r.out;
      EXPECT_NE(r.out.find(std::string(c.mpiName) + " float"), std::string::npos) << r.out;
      const auto table = rows(r.out);
      EXPECT_EQ(table.size(), 6u) << what << ":\n" << r.out;  // 8, 64, ... 256K
      for (const auto& row : table) {
        EXPECT_EQ(row.size(), 9u) << what << ":\n" << r.out;
        if (row.size() != 9u) break;
        EXPECT_EQ(row[4], c.rooted ? (np == 3 ? "1" : "0") : "-1") << what << ":\n" << r.out;
        EXPECT_EQ(row[8], "0") << what << ":\n" << r.out;  // #wrong
      }
    }
  }
}

// Counts as our tools count (perf::countsFor): 64 B of float over 2 ranks is 8 elements
// per rank or per peer for the split calls, 16 for the whole-buffer ones.
TEST(PerfMpiBench, CountColumnMatchesOurTools) {
  if (!haveMpirun()) GTEST_SKIP() << "mpirun is not installed";
  for (const Coll& c : kColls) {
    const testshell::Result r = runBench(2, std::string("--coll ") + c.flag + " -b 64 -e 64");
    ASSERT_EQ(r.status, 0) << c.flag << ":\n" << r.out;
    const auto table = rows(r.out);
    ASSERT_EQ(table.size(), 1u) << c.flag << ":\n" << r.out;
    const std::string f = c.flag;
    const bool whole = f == "allreduce" || f == "bcast" || f == "reduce";
    EXPECT_EQ(table[0][0], "64") << c.flag << ":\n" << r.out;
    EXPECT_EQ(table[0][1], whole ? "16" : "8") << c.flag << ":\n" << r.out;
  }
}

TEST(PerfMpiBench, Refusals) {
  if (!haveMpirun()) GTEST_SKIP() << "mpirun is not installed";
  struct Bad {
    const char* flags;
    const char* why;
  };
  for (const Bad& b : {Bad{"--coll gatherv", "invalid value 'gatherv' for --coll"},
                       Bad{"--coll", "invalid value '' for --coll"},
                       Bad{"--coll gather -r 2", "-r 2 is not a rank of 2"},
                       Bad{"--coll scatter -r all", "-r all: one root per run"},
                       Bad{"--coll reduce -b 8x", "invalid value '8x' for -b"}}) {
    const testshell::Result r = runBench(2, b.flags);
    EXPECT_EQ(r.status, 2) << b.flags << ":\n" << r.out;
    EXPECT_NE(r.out.find(std::string("mpi_allreduce_bench: ") + b.why), std::string::npos)
        << b.flags << ":\n" << r.out;
    EXPECT_TRUE(rows(r.out).empty()) << b.flags << ":\n" << r.out;
  }
}

// compare_collectives.sh with the new collectives: one row per size for each, our busbw
// and Open MPI's side by side with a ratio; gather and scatter run our tools in
// --native 1 mode. An unknown name is refused before anything runs.
TEST(PerfCompareCollectives, NewCollectives) {
  if (!haveMpirun()) GTEST_SKIP() << "mpirun is not installed";
  const std::string cmd = std::string(COMPARE_SCRIPT) + " " + BUILD_DIR +
                          " --np 2 --colls \"reduce alltoall gather scatter\" -b 1K -e 64K -f 8 -n 2 -w 1";
  const testshell::Result r = testshell::run(cmd);
  ASSERT_EQ(r.status, 0) << cmd << ":\n" << r.out;
  for (const char* coll : {"reduce", "alltoall", "gather", "scatter"}) {
    int found = 0;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream fields(line);
      std::vector<std::string> f;
      for (std::string w; fields >> w;) f.push_back(w);
      // coll size | ours GB/s ours us | ompi GB/s ompi us | ratio verdict
      if (f.size() < 10 || f[0] != coll) continue;
      ++found;
      EXPECT_EQ(f[2], "|") << line;
      EXPECT_GT(std::stod(f[4]), 0.0) << line;  // our time
      EXPECT_GT(std::stod(f[7]), 0.0) << line;  // Open MPI's time
      // The ratio, printed to two decimals: a round that one slow call on a busy machine
      // made hundreds of times slower prints 0.00, so only its form is checked here.
      EXPECT_GE(std::stod(f[9]), 0.0) << line;
    }
    EXPECT_EQ(found, 3) << coll << ":\n" << r.out;  // 1K, 8K, 64K
  }
  EXPECT_NE(r.out.find("# verdict:"), std::string::npos) << r.out;
  const testshell::Result bad =
      testshell::run(std::string(COMPARE_SCRIPT) + " " + BUILD_DIR + " --colls gatherv");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("unknown collective gatherv"), std::string::npos) << bad.out;
}

// The all-reduce targets' script: a table row per size with both libraries' times, and
// the 8-byte verdict from its own run of --lat-iters calls (the sweep's first size is
// only quoted beside it); bad --lat-iters is refused.
TEST(PerfCompareAllreduce, LatencyVerdictFromItsOwnRun) {
  if (!haveMpirun()) GTEST_SKIP() << "mpirun is not installed";
  const std::string cmd = std::string(COMPARE_ALLREDUCE) + " " + BUILD_DIR + " --lat-iters 300 -b 8 -e 512 -f 8 -n 5 -w 1";
  const testshell::Result r = testshell::run(cmd);
  ASSERT_EQ(r.status, 0) << cmd << ":\n" << r.out;
  int found = 0;
  for (const auto& f : rows(r.out)) {
    // size | ours GB/s ours us %mcpy | ompi GB/s ompi us bw-x t-x | ...
    ASSERT_GE(f.size(), 10u);
    ++found;
    EXPECT_GT(std::stod(f[3]), 0.0) << f[0];  // our time
    EXPECT_GT(std::stod(f[7]), 0.0) << f[0];  // Open MPI's time
  }
  EXPECT_EQ(found, 3) << r.out;  // 8, 64, 512
  const size_t at = r.out.find("# verdict: 8 B latency ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string verdict = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(verdict.find("own run of 300 calls; first size of the sweep:"), std::string::npos) << verdict;
  EXPECT_TRUE(verdict.find("PASS") != std::string::npos || verdict.find("FAIL") != std::string::npos) << verdict;
  EXPECT_NE(r.out.find("running ours_lat:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-b 8 -e 8 -n 300 -w 16"), std::string::npos) << r.out;

  const testshell::Result bad = testshell::run(std::string(COMPARE_ALLREDUCE) + " " + BUILD_DIR + " --lat-iters many");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--lat-iters takes a count, got 'many'"), std::string::npos) << bad.out;
}
