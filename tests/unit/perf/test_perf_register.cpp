// The *_perf tools' -R 1 as a user meets it: the send and receive buffers come from
// collMemAlloc (memory that same-host ranks map and copy directly), the header says so,
// and two ranks on this host get every value right (-c 1, exit 0 and "Out of bounds
// values : 0 OK"). Bad values and -R 1 with -g 1 are usage errors (exit 2) before any
// job is joined; a failed collMemAlloc is an error message and exit 1, not a crash.
// The tool paths come from meson (PERF_TOOL_DIR, COLLECTIVERUN).
#include <gtest/gtest.h>

#include <string>

#include "../shell_util.hpp"

namespace {

std::string tool(const std::string& name) { return std::string(PERF_TOOL_DIR) + "/" + name; }

testshell::Result runTwoRanks(const std::string& name, const std::string& flags) {
  return testshell::run(std::string(COLLECTIVERUN) + " --timeout 60 -np 2 " + tool(name) + " " +
                        flags);
}

const char* const kTools[] = {"all_reduce_perf", "all_gather_perf", "broadcast_perf", "reduce_perf",
                              "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"};
const char kBuffersLine[] = "#  Buffers: collMemAlloc (shared with same-host peers)";
const char kAllRight[] = "# Out of bounds values : 0 OK";

// -R 1 -c 1 on 2 ranks: exit 0, every value right, and the header names the buffers.
void expectCleanSweep(const std::string& name, const std::string& flags) {
  const testshell::Result r = runTwoRanks(name, "-R 1 -c 1 " + flags);
  EXPECT_EQ(r.status, 0) << name << " " << flags << ":\n" << r.out;
  EXPECT_NE(r.out.find(kBuffersLine), std::string::npos) << name << " " << flags << ":\n" << r.out;
  EXPECT_NE(r.out.find(kAllRight), std::string::npos) << name << " " << flags << ":\n" << r.out;
}

// Sizes 32 B .. 8 MiB (factor 8): the small-message paths and the large single-copy ones.
const char kSweep[] = "-b 32 -e 8M -f 8 -n 5 -w 2";

}  // namespace

// Refused at once, before collCommInitFromEnv (no launcher environment at all): every
// rank of a job would fail alike, so none waits for the others.
TEST(PerfRegister, UsageErrors) {
  struct Case {
    const char* flags;
    const char* expect;
  };
  const Case cases[] = {
      {"-R 2", "-R 2: symmetric registration is not supported"},
      {"-R x", "invalid value 'x' for -R"},
      {"--register=-1", "for --register"},
      {"-R 1 -g 1", "cannot be combined with -g 1"},
      {"-g 1 --register 1", "cannot be combined with -g 1"},
  };
  for (const char* name : kTools) {
    for (const Case& c : cases) {
      const testshell::Result r =
          testshell::run("env -u COLL_RANK -u COLL_SIZE " + tool(name) + " " + c.flags);
      EXPECT_EQ(r.status, 2) << name << " " << c.flags << ":\n" << r.out;
      EXPECT_NE(r.out.find(c.expect), std::string::npos) << name << " " << c.flags << ":\n" << r.out;
      EXPECT_NE(r.out.find("usage: "), std::string::npos) << r.out;
      EXPECT_EQ(r.out.find("collCommInitFromEnv"), std::string::npos) << r.out;
    }
  }
}

TEST(PerfRegister, HelpNamesTheFlag) {
  const testshell::Result r = testshell::run(tool("all_gather_perf") + " -h");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("-R,--local_register <0|1>"), std::string::npos) << r.out;
}

// -R 0 is the default: host buffers as before, and no buffers line in the header.
TEST(PerfRegister, HostBuffersByDefault) {
  for (const char* flags : {"", "-R 0 "}) {
    const testshell::Result r =
        runTwoRanks("all_gather_perf", std::string(flags) + "-b 8 -e 64K -f 8 -n 2 -w 1");
    EXPECT_EQ(r.status, 0) << flags << ":\n" << r.out;
    EXPECT_EQ(r.out.find("collMemAlloc"), std::string::npos) << flags << ":\n" << r.out;
    EXPECT_NE(r.out.find(kAllRight), std::string::npos) << flags << ":\n" << r.out;
  }
}

// collMemAlloc cannot map the buffers under a small address-space limit: each rank says
// why (the library's message) and the job exits 1; nothing crashes or hangs.
TEST(PerfRegister, AllocationFailureIsAnError) {
  const testshell::Result r = testshell::run(
      "ulimit -v 4000000 && " + std::string(COLLECTIVERUN) + " --timeout 60 -np 2 " +
      tool("all_gather_perf") + " -R 1 -b 8 -e 8G -n 1 -w 0");
  if (r.out.find("collCommInitFromEnv failed") != std::string::npos ||
      r.out.find("Sanitizer failed to allocate") != std::string::npos ||  // ASan
      r.out.find("Sanitizer: CHECK failed") != std::string::npos)          // TSan
    GTEST_SKIP() << "the job does not start under ulimit -v here:\n" << r.out;
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("collMemAlloc(8589934592 bytes) failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(kAllRight), std::string::npos) << r.out;
}

TEST(PerfRegisterSweep, AllGather) { expectCleanSweep("all_gather_perf", kSweep); }
TEST(PerfRegisterSweep, Broadcast) {
  expectCleanSweep("broadcast_perf", kSweep);
  expectCleanSweep("broadcast_perf", "-b 8 -e 64K -f 8 -n 2 -w 1 -r 1");
}
TEST(PerfRegisterSweep, AllReduce) {
  expectCleanSweep("all_reduce_perf", kSweep);
  // Every type and op through the mapped buffers, at small sizes.
  expectCleanSweep("all_reduce_perf", "-b 8 -e 64K -f 8 -n 2 -w 1 -d all -o all");
}
// The other tools take -R 1 too.
TEST(PerfRegisterSweep, OtherTools) {
  // sendrecv_perf's in-place column sends a buffer and receives its replacement into it.
  for (const char* name : {"reduce_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"})
    expectCleanSweep(name, "-b 32 -e 1M -f 8 -n 3 -w 1");
}
