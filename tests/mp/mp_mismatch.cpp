// Ranks in separate processes whose calls differ: the last rank's call differs from the
// others'.
//
//   mp_mismatch op     all-reduce of 1M floats (large enough for single-copy on shared
//                      memory), sum on every rank but the last, which asks for max
//   mp_mismatch kind   all-reduce of 256 floats on every rank but the last, which calls
//                      a barrier
//
// Every rank must fail within 10 s (run it with COLL_TIMEOUT well above that):
// collInvalidUsage naming how the calls differ where a mismatched message arrived,
// collRemoteError on the others (told by the job, or by a link the failing rank gave up).
// Each rank prints "rank R: <result> after S s: <message>" and keeps its communicator
// 2 s before it aborts it and leaves, so that the others learn of the failure while it
// is still there. Exit 0 when this rank's outcome is as described, 1 when not, 2 for no
// communicator or a bad command line.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collective.h"

int main(int argc, char** argv) {
  const std::string mode = argc == 2 ? argv[1] : "";
  if (mode != "op" && mode != "kind") {
    std::fprintf(stderr, "usage: mp_mismatch op|kind\n");
    return 2;
  }
  collComm_t comm = nullptr;
  if (collCommInitFromEnv(&comm) != collSuccess) {
    std::printf("no communicator: %s\n", collGetLastError(nullptr));
    return 2;
  }
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  const bool odd = rank == n - 1;
  const size_t count = mode == "op" ? size_t{1} << 20 : 256;
  std::vector<float> in(count, static_cast<float>(rank + 1)), out(count, 0.0f);
  const auto start = std::chrono::steady_clock::now();
  collResult_t rc;
  if (mode == "kind" && odd) rc = collBarrier(comm);
  else rc = collAllReduce(in.data(), out.data(), count, collFloat32, mode == "op" && odd ? collMax : collSum, comm, nullptr);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string text = collGetLastError(comm);
  std::printf("rank %d: %s after %.2f s: %s\n", rank, collGetErrorString(rc), s, text.c_str());
  std::fflush(stdout);
  bool ok = s < 10;
  if (rc == collInvalidUsage) ok = ok && text.find("the calls differ in") != std::string::npos;
  else ok = ok && rc == collRemoteError;
  std::this_thread::sleep_for(std::chrono::seconds(2));
  collCommAbort(comm);
  return ok ? 0 : 1;
}
