// The *_perf tools run as a user runs them (collectiverun, one rank per process): what
// they print and how they fail. The tool paths come from meson (PERF_TOOL_DIR,
// COLLECTIVERUN).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "../shell_util.hpp"

namespace {

testshell::Result runTool(int np, const std::string& name, const std::string& flags) {
  return testshell::run(std::string(COLLECTIVERUN) + " --timeout 60 -np " + std::to_string(np) +
                        " " + PERF_TOOL_DIR + "/" + name + " " + flags);
}

// The whitespace-separated fields of rank 0's first result row.
std::vector<std::string> firstRow(const std::string& out) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("[0] ", 0) == 0) line = line.substr(4);
    std::istringstream fields(line);
    std::vector<std::string> row;
    for (std::string f; fields >> f;) row.push_back(f);
    if (!row.empty() && row[0].find_first_not_of("0123456789") == std::string::npos) return row;
  }
  return {};
}

}  // namespace

// A -e within a page of SIZE_MAX once wrapped the buffer size to one page, and the sweep
// wrote past it (segmentation fault at about 8 KiB). It is an allocation failure.
TEST(PerfTools, HugeMaxBytesIsAnErrorNotACrash) {
  for (const char* e : {"18446744073709551615", "18446744073709551000"}) {
    const testshell::Result r = runTool(1, "all_reduce_perf", std::string("-e ") + e + " -n 1 -w 0");
    EXPECT_EQ(r.status, 1) << e << ":\n" << r.out;
    EXPECT_NE(r.out.find(std::string("cannot allocate ") + e + " bytes"), std::string::npos)
        << r.out;
  }
}

// nccl-tests prints the count passed to the collective (its paramCount): per rank for
// all-gather, reduce-scatter, all-to-all, gather, scatter and hypercube, while size is
// the larger buffer. 64 bytes of float over 2 ranks: 8 elements per rank, not the 16 of
// the whole buffer.
TEST(PerfTools, CountColumnIsTheCountOfTheCall) {
  struct Case {
    const char* tool;
    const char* count;
  };
  for (const Case& c : {Case{"all_gather_perf", "8"}, Case{"reduce_scatter_perf", "8"},
                        Case{"alltoall_perf", "8"}, Case{"all_reduce_perf", "16"},
                        Case{"broadcast_perf", "16"}, Case{"gather_perf", "8"},
                        Case{"scatter_perf", "8"}, Case{"hypercube_perf", "8"}}) {
    const testshell::Result r = runTool(2, c.tool, "-b 64 -e 64 -n 1 -w 0");
    ASSERT_EQ(r.status, 0) << c.tool << ":\n" << r.out;
    const std::vector<std::string> row = firstRow(r.out);
    ASSERT_GE(row.size(), 5u) << c.tool << ":\n" << r.out;
    EXPECT_EQ(row[0], "64") << c.tool << ":\n" << r.out;
    EXPECT_EQ(row[1], c.count) << c.tool << ":\n" << r.out;
    EXPECT_EQ(row[2], "float") << c.tool << ":\n" << r.out;
  }
}
