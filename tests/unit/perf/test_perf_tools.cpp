// The *_perf tools run as a user runs them (collectiverun, one rank per process): what
// they print and how they fail. The tool paths come from meson (PERF_TOOL_DIR,
// COLLECTIVERUN).
#include <gtest/gtest.h>

#include <string>

#include "../shell_util.hpp"

namespace {

testshell::Result runTool(int np, const std::string& name, const std::string& flags) {
  return testshell::run(std::string(COLLECTIVERUN) + " --timeout 60 -np " + std::to_string(np) +
                        " " + PERF_TOOL_DIR + "/" + name + " " + flags);
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
