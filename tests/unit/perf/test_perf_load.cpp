// perf/under_load.sh starts busy processes next to a benchmark and stops them with it;
// engine_bench latency checks every result it times. Paths come from meson
// (UNDER_LOAD, COLLECTIVERUN, ENGINE_BENCH).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "../shell_util.hpp"

namespace {

const std::string kScript = std::string("bash ") + UNDER_LOAD;

// A blocking engine all-reduce and a plain one, one call at a time, next to two busy
// processes: both run, every value is right, and the medians are printed.
TEST(PerfUnderLoad, EngineLatencyNextToBusyProcesses) {
  const std::string cmd = kScript + " --hogs 2 " + COLLECTIVERUN + " --timeout 60 -np 2 " + ENGINE_BENCH +
                          " latency --bytes 64 --iters 50 --warmup 5";
  const testshell::Result r = testshell::run(cmd);
  ASSERT_EQ(r.status, 0) << cmd << ":\n" << r.out;
  EXPECT_NE(r.out.find("# under_load.sh: 2 busy processes next to:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("64 bytes, 2 ranks, one blocking call at a time, 50 calls: engine median"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# wrong values: 0 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("RESULT latency_engine_us"), std::string::npos) << r.out;
}

// The busy processes end with the command, whose exit status comes through.
TEST(PerfUnderLoad, StopsItsProcessesAndKeepsTheStatus) {
  const std::string marker = "under-load-marker-" + std::to_string(getpid());
  const testshell::Result r = testshell::run(kScript + " --hogs 2 sh -c 'exit 7' " + marker);
  EXPECT_EQ(r.status, 7) << r.out;
  // The bracket keeps the pattern from matching the shell that runs pgrep.
  const testshell::Result left = testshell::run("pgrep -f 'under-load-marke[r]-" + std::to_string(getpid()) + "'");
  EXPECT_EQ(left.status, 1) << "busy processes left running:\n" << left.out;
  if (left.status == 0) testshell::run("pkill -f 'under-load-marke[r]-" + std::to_string(getpid()) + "'");
}

TEST(PerfUnderLoad, RefusesBadArguments) {
  const testshell::Result bad = testshell::run(kScript + " --hogs many true");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--hogs wants a whole number, got 'many'"), std::string::npos) << bad.out;
  const testshell::Result none = testshell::run(kScript);
  EXPECT_EQ(none.status, 2) << none.out;
  EXPECT_NE(none.out.find("usage: perf/under_load.sh"), std::string::npos) << none.out;
  const testshell::Result engine = testshell::run(std::string(ENGINE_BENCH) + " latency --bytes");
  EXPECT_EQ(engine.status, 2) << engine.out;
  EXPECT_NE(engine.out.find("missing value for --bytes"), std::string::npos) << engine.out;
}

}  // namespace
