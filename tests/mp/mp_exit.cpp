// Ranks leave at different times: rank 0 is done first, destroys its communicator and
// exits while the others still work. They must complete: a rank that finished and left
// cleanly is not a failure. Rank 0 also serves the job's rendezvous, so this checks that
// leaving does not pull the rendezvous from under the ranks still working.
//
//   mp_exit p2p     3 ranks. A chain of sends 0 -> 1 -> 2; rank 2 posts its receive
//                   0.5 s late, after rank 0 has gone.
//   mp_exit bcast   3 or more ranks. Rank 0 broadcasts 4 KiB; rank r > 0 calls the
//                   broadcast 0.2 + 0.1 * (nranks - r) s late, so the higher ranks wait
//                   on lower non-root ranks (their parents in a chain or tree) while
//                   rank 0, whose sends are done, is gone.
//
// Whether a send returns once its data is buffered or only once it was received, a
// correct library passes. Exit codes: 0 passed, 1 a call failed or the data is wrong,
// 2 no communicator or a bad command line.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "collective.h"

namespace {

constexpr size_t kCount = 1024;

int fail(int rank, const char* what, collResult_t rc, collComm_t comm) {
  std::printf("rank %d: FAILED: %s returned %s: %s\n", rank, what, collGetErrorString(rc),
              collGetLastError(comm));
  collCommAbort(comm);
  return 1;
}

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

int chainOfSends(int rank, collComm_t comm, std::vector<int32_t>& buf) {
  collResult_t rc = collSuccess;
  if (rank == 0) {
    if ((rc = collSend(buf.data(), kCount, collInt32, 1, comm, nullptr)) != collSuccess)
      return fail(rank, "collSend to rank 1", rc, comm);
  } else if (rank == 1) {
    if ((rc = collRecv(buf.data(), kCount, collInt32, 0, comm, nullptr)) != collSuccess)
      return fail(rank, "collRecv from rank 0", rc, comm);
    if ((rc = collSend(buf.data(), kCount, collInt32, 2, comm, nullptr)) != collSuccess)
      return fail(rank, "collSend to rank 2", rc, comm);
  } else if (rank == 2) {
    sleepMs(500);
    if ((rc = collRecv(buf.data(), kCount, collInt32, 1, comm, nullptr)) != collSuccess)
      return fail(rank, "collRecv from rank 1 (after rank 0 left)", rc, comm);
  }
  return 0;
}

int lateBroadcast(int rank, int n, collComm_t comm, std::vector<int32_t>& buf) {
  if (rank != 0) sleepMs(200 + 100 * (n - rank));
  collResult_t rc = collBroadcast(buf.data(), buf.data(), kCount, collInt32, 0, comm, nullptr);
  return rc == collSuccess ? 0 : fail(rank, "collBroadcast from rank 0", rc, comm);
}

}  // namespace

int main(int argc, char** argv) {
  bool p2p = argc == 2 && std::strcmp(argv[1], "p2p") == 0;
  if (argc != 2 || (!p2p && std::strcmp(argv[1], "bcast") != 0)) {
    std::fprintf(stderr, "usage: %s p2p|bcast\n", argv[0]);
    return 2;
  }
  collComm_t comm = nullptr;
  if (collCommInitFromEnv(&comm) != collSuccess) {
    std::fprintf(stderr, "mp_exit: collCommInitFromEnv failed: %s\n", collGetLastError(nullptr));
    return 2;
  }
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  if (p2p ? n != 3 : n < 3) {
    std::fprintf(stderr, "mp_exit %s: wrong number of ranks (%d)\n", argv[1], n);
    return 2;
  }
  std::vector<int32_t> buf(kCount, -1);
  if (rank == 0)
    for (size_t i = 0; i < kCount; ++i) buf[i] = static_cast<int32_t>(i * 7);
  int rc = p2p ? chainOfSends(rank, comm, buf) : lateBroadcast(rank, n, comm, buf);
  if (rc != 0) return rc;
  for (size_t i = 0; i < kCount; ++i) {
    if (buf[i] != static_cast<int32_t>(i * 7)) {
      std::printf("rank %d: FAILED: element %zu is %d, expected %zu\n", rank, i, buf[i], i * 7);
      return 1;
    }
  }
  if (collCommDestroy(comm) != collSuccess) {
    std::printf("rank %d: FAILED: collCommDestroy: %s\n", rank, collGetLastError(nullptr));
    return 1;
  }
  std::printf("rank %d of %d: OK\n", rank, n);
  return 0;
}
