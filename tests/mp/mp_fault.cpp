// A job in which one rank misbehaves, for the failure tests (fault_test.py):
//
//   mp_fault die  VICTIM   VICTIM kills itself (SIGKILL) while a large all-reduce is in flight
//   mp_fault hang VICTIM   VICTIM joins the communicator, then never calls a collective
//
// The other ranks run all-reduces in a loop and must fail with collRemoteError or
// collTimeout. Each prints one line
//   rank R: detected failure: collRemoteError after S s in iteration I: <library's message>
// and exits with 3 (4 for any other error, 5 if the loop ended without an error).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "collective.h"

namespace {

constexpr int kDetected = 3, kOtherError = 4, kNoError = 5;
constexpr size_t kCount = size_t{2} << 20;  // 8 MiB of floats: a transfer takes a while
constexpr int kVictimIteration = 3;
constexpr int kIterations = 1000;

using Clock = std::chrono::steady_clock;

// The enumerator's name, which the test driver matches (the descriptive text may change).
const char* resultName(collResult_t rc) {
  switch (rc) {
    case collRemoteError: return "collRemoteError";
    case collTimeout: return "collTimeout";
    case collSystemError: return "collSystemError";
    case collInternalError: return "collInternalError";
    case collInvalidUsage: return "collInvalidUsage";
    default: return "other";
  }
}

[[noreturn]] void die(int rank, collComm_t comm, std::vector<float>& buf) {
  collRequest_t req = nullptr;
  collResult_t rc = collIallReduce(buf.data(), buf.data(), kCount, collFloat32, collSum, comm, &req);
  if (rc != collSuccess) std::fprintf(stderr, "rank %d: collIallReduce failed: %s\n", rank, collGetErrorString(rc));
  // Let the transfer get going so that the peers lose us mid-operation.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::printf("rank %d: raising SIGKILL during an all-reduce\n", rank);
  std::fflush(stdout);
  raise(SIGKILL);
  std::abort();  // not reached
}

// The survivors' loop: returns the process exit code.
int survive(int rank, collComm_t comm, std::vector<float>& buf, bool hang) {
  // collectiverun stops the whole job (SIGTERM, SIGKILL 3 s later) as soon as the victim
  // dies. Ignoring SIGTERM leaves those 3 s to the library to notice the loss by itself,
  // which is what this test is about.
  signal(SIGTERM, SIG_IGN);
  for (int it = 0; it < kIterations; ++it) {
    auto t0 = Clock::now();
    collResult_t rc = collAllReduce(buf.data(), buf.data(), kCount, collFloat32, collSum, comm, nullptr);
    if (rc == collSuccess) continue;
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("rank %d: detected failure: %s after %.3f s in iteration %d: %s: %s\n", rank,
                resultName(rc), s, it, collGetErrorString(rc), collGetLastError(comm));
    std::fflush(stdout);
    // With a hung peer every survivor must reach its own timeout: wait before aborting
    // (which tells the others) and exiting (which makes collectiverun stop the job).
    if (hang) std::this_thread::sleep_for(std::chrono::seconds(1));
    collCommAbort(comm);
    return rc == collRemoteError || rc == collTimeout ? kDetected : kOtherError;
  }
  std::printf("rank %d: no error in %d iterations\n", rank, kIterations);
  return kNoError;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "die") != 0 && std::strcmp(argv[1], "hang") != 0)) {
    std::fprintf(stderr, "usage: %s die|hang VICTIM\n", argv[0]);
    return 2;
  }
  bool hang = std::strcmp(argv[1], "hang") == 0;
  int victim = std::atoi(argv[2]);
  collComm_t comm = nullptr;
  collResult_t rc = collCommInitFromEnv(&comm);
  if (rc != collSuccess) {
    std::fprintf(stderr, "mp_fault: collCommInitFromEnv failed: %s: %s\n", collGetErrorString(rc),
                 collGetLastError(nullptr));
    return 2;
  }
  int rank = 0;
  collCommUserRank(comm, &rank);
  std::vector<float> buf(kCount, 1.0f);
  if (rank == victim && hang) {
    std::printf("rank %d: joined, now never calling a collective\n", rank);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  if (rank == victim) {
    for (int it = 0; it < kVictimIteration; ++it)
      collAllReduce(buf.data(), buf.data(), kCount, collFloat32, collSum, comm, nullptr);
    die(rank, comm, buf);
  }
  return survive(rank, comm, buf, hang);
}
