// The *_perf tools' -g 1 as a user meets it: on a machine (or build) that cannot put the
// buffers on a GPU the tool refuses at once, before joining any job, with a message and
// a nonzero status; on a GPU machine two ranks run the sweep on device buffers and
// every check passes. The tool paths come from meson (PERF_TOOL_DIR, COLLECTIVERUN).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "../shell_util.hpp"
#if PERF_HAVE_CUDA
#include "device_buffers.hpp"
#endif

namespace {

// status, and output (stdout and stderr together) of a command line.
struct Outcome {
  int status = -1;
  std::string output;
};

Outcome runCommand(const std::string& cmd) {
  testshell::Result r = testshell::run(cmd);
  return {r.status, r.out};
}

std::string tool(const char* name) { return std::string(PERF_TOOL_DIR) + "/" + name; }

bool deviceBuffersPossible() {
#if PERF_HAVE_CUDA
  return perf::cuda::available();
#else
  return false;
#endif
}

const char* const kTools[] = {"all_reduce_perf", "all_gather_perf", "broadcast_perf", "reduce_perf",
                              "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"};

}  // namespace

// No launcher environment at all: the refusal must come before collCommInitFromEnv,
// which would otherwise be the failure seen (or a wait for peers under a launcher).
TEST(PerfGpuFlag, RefusedAtOnceWithoutADevice) {
  if (deviceBuffersPossible()) GTEST_SKIP() << "a CUDA device is present";
#if PERF_HAVE_CUDA
  const std::string expect = "-g 1: no CUDA device";
#else
  const std::string expect = "-g 1: built without CUDA";
#endif
  for (const char* name : kTools) {
    for (const char* flag : {"-g 1", "--ngpus=1", "-g1"}) {
      const Outcome o = runCommand("env -u COLL_RANK -u COLL_SIZE " + tool(name) + " " + flag);
      EXPECT_EQ(o.status, 2) << name << " " << flag << ": " << o.output;
      EXPECT_NE(o.output.find(expect), std::string::npos) << name << " " << flag << ": " << o.output;
      EXPECT_EQ(o.output.find("collCommInitFromEnv"), std::string::npos) << o.output;
    }
  }
  // gather_perf and scatter_perf with --native 1 take -g 1 (one library call) and meet
  // the same device check as the others.
  for (const char* name : {"gather_perf", "scatter_perf"}) {
    const Outcome o =
        runCommand("env -u COLL_RANK -u COLL_SIZE " + tool(name) + " --native 1 -g 1");
    EXPECT_EQ(o.status, 2) << name << ": " << o.output;
    EXPECT_NE(o.output.find(expect), std::string::npos) << name << ": " << o.output;
    EXPECT_EQ(o.output.find("not supported by"), std::string::npos) << name << ": " << o.output;
  }
}

// -g 0 is the default (host buffers): still accepted everywhere.
TEST(PerfGpuFlag, HostBuffersStillRun) {
  const Outcome o = runCommand(std::string(COLLECTIVERUN) + " -np 2 " + tool("all_reduce_perf") +
                               " -g 0 -b 8 -e 64K -n 2 -w 1");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("[cpu]"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("Out of bounds values : 0 OK"), std::string::npos) << o.output;
}

// Ranks as processes on one host: with one GPU, several ranks share it (the CUDA IPC
// path opens the other processes' scratch with cudaIpcOpenMemHandle).
TEST(PerfGpuFlag, DeviceBuffersInSeveralProcesses) {
  if (!deviceBuffersPossible()) {
    std::printf("no CUDA device\n");
    GTEST_SKIP() << "no CUDA device";
  }
  auto expectClean = [](const std::string& what, const Outcome& o) {
    EXPECT_EQ(o.status, 0) << what << ": " << o.output;
    EXPECT_NE(o.output.find("[GPU "), std::string::npos) << what << ": " << o.output;
    EXPECT_NE(o.output.find("Out of bounds values : 0 OK"), std::string::npos) << what << ": " << o.output;
  };
  for (const char* name : kTools)
    expectClean(name, runCommand(std::string(COLLECTIVERUN) + " -np 2 " + tool(name) +
                                 " -g 1 -b 8 -e 1M -f 4 -n 3 -w 1 -d all -o all"));
  for (const char* name : {"gather_perf", "scatter_perf"})
    expectClean(std::string(name) + " --native 1",
                runCommand(std::string(COLLECTIVERUN) + " -np 2 " + tool(name) +
                           " --native 1 -g 1 -b 8 -e 1M -f 4 -n 3 -w 1 -d all -r all"));
  for (const char* name : {"all_reduce_perf", "reduce_scatter_perf", "all_gather_perf"})
    expectClean(std::string(name) + " -np 4",
                runCommand(std::string(COLLECTIVERUN) + " -np 4 " + tool(name) +
                           " -g 1 -b 8 -e 64M -f 8 -n 2 -w 1 -d float -o sum"));
}
