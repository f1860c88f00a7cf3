// A job in which one rank misbehaves, for the failure tests (fault_test.py):
//
//   mp_fault die   VICTIM  VICTIM kills itself (SIGKILL) while a large collective is in flight
//   mp_fault hang  VICTIM  VICTIM joins the communicator, then never calls a collective
//   mp_fault stop  VICTIM  VICTIM stops itself (SIGSTOP) while a large collective is in
//                          flight: alive, its sockets open, but frozen
//   mp_fault init  VICTIM  VICTIM kills itself while it waits in collCommInitFromEnv for
//                          rank --late, which starts its own 1 s late
//   mp_fault split VICTIM  the ranks loop collCommSplit (by parity) and an all-reduce on
//                          the new communicator; VICTIM kills itself when it would call its
//                          first split, or --kill-ms milliseconds into the loop
//   mp_fault hvd   VICTIM  the Horovod-style engine: VICTIM kills itself with an
//                          allreduce_async in flight; the others' synchronize must throw
//
// Options:
//   --coll NAME   die, hang, stop: the collective in the loop: allreduce (default), broadcast,
//                 reduce, allgather, reducescatter, alltoall, barrier, sendrecv (a ring of
//                 collSend/collRecv in one group), recv (every other rank receives from
//                 VICTIM, which sends to all of them in one group)
//   --count N     float32 elements per rank's block (default 2 Mi: 8 MiB)
//   --root R      root of broadcast and reduce (default 0)
//   --late R      init: the rank that starts 1 s late (default: the one after VICTIM;
//                 R >= the number of ranks: none)
//   --kill-ms MS  init: when VICTIM dies (default 300 ms after it started);
//                 split: how long VICTIM runs its split loop before it dies (0: at once)
//
// The other ranks loop and must fail with collRemoteError or collTimeout. Each prints
// one line
//   rank R: detected failure: collRemoteError after S s in iteration I: <library's message>
// and exits with 3 (4 for any other error, 5 if 8 s of the loop went by without an error).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collective.h"
#include "collective/hvd.hpp"

namespace {

constexpr int kDetected = 3, kOtherError = 4, kNoError = 5;
constexpr int kVictimIteration = 3;
// The survivors loop this long: small operations to a rank that is only a leaf (of a
// broadcast, say) may be buffered and complete without it, for a while.
constexpr auto kLoopFor = std::chrono::seconds(8);

using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode;
  int victim = -1;
  std::string coll = "allreduce";
  size_t count = size_t{2} << 20;  // 8 MiB of floats: a transfer takes a while
  int root = 0;
  int late = -1;
  int killMs = 0;
};

// The enumerator's name, which the test driver matches (the descriptive text may change).
const char* resultName(collResult_t rc) {
  switch (rc) {
    case collRemoteError: return "collRemoteError";
    case collTimeout: return "collTimeout";
    case collSystemError: return "collSystemError";
    case collInternalError: return "collInternalError";
    case collInvalidUsage: return "collInvalidUsage";
    case collInvalidArgument: return "collInvalidArgument";
    default: return "other";
  }
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// SIGKILL, or SIGSTOP (the process stays, frozen, until the launcher kills it).
[[noreturn]] void killSelf(int rank, const char* during, int sig = SIGKILL) {
  std::printf("rank %d: raising %s %s\n", rank, sig == SIGSTOP ? "SIGSTOP" : "SIGKILL", during);
  std::fflush(stdout);
  raise(sig);
  std::this_thread::sleep_for(std::chrono::seconds(60));  // continued: still take no part
  std::abort();
}

int report(int rank, collResult_t rc, double s, int it, const char* msg) {
  std::printf("rank %d: detected failure: %s after %.3f s in iteration %d: %s: %s\n", rank,
              resultName(rc), s, it, collGetErrorString(rc), msg);
  std::fflush(stdout);
  return rc == collRemoteError || rc == collTimeout ? kDetected : kOtherError;
}

// The buffers of one rank, sized for the collective.
struct Buffers {
  std::vector<float> send, recv;
};

Buffers makeBuffers(const Options& o, int nranks) {
  bool wideSend = o.coll == "reducescatter" || o.coll == "alltoall";
  bool wideRecv = o.coll == "allgather" || o.coll == "alltoall";
  return {std::vector<float>(o.count * (wideSend ? nranks : 1), 1.0f),
          std::vector<float>(o.count * (wideRecv ? nranks : 1), 1.0f)};
}

// Starts one operation of the loop without waiting for it (the victim's last one), or
// runs it to completion when req is null.
collResult_t issue(const Options& o, collComm_t comm, int rank, int nranks, Buffers& b,
                   collRequest_t* req) {
  const float* s = b.send.data();
  float* r = b.recv.data();
  size_t n = o.count;
  const std::string& c = o.coll;
  if (c == "sendrecv" || c == "recv") {
    // Both are groups of point-to-point calls; a request per call would not fit the
    // one-request interface, so the victim's last one blocks (and is killed) too.
    collGroupStart();
    if (c == "sendrecv") {
      collSend(s, n, collFloat32, (rank + 1) % nranks, comm, nullptr);
      collRecv(r, n, collFloat32, (rank + nranks - 1) % nranks, comm, nullptr);
    } else if (rank == o.victim) {
      for (int p = 0; p < nranks; ++p)
        if (p != rank) collSend(s, n, collFloat32, p, comm, nullptr);
    } else {
      collRecv(r, n, collFloat32, o.victim, comm, nullptr);
    }
    return collGroupEnd();
  }
  if (req) {
    if (c == "allreduce") return collIallReduce(s, r, n, collFloat32, collSum, comm, req);
    if (c == "broadcast") return collIbroadcast(s, r, n, collFloat32, o.root, comm, req);
    if (c == "reduce") return collIreduce(s, r, n, collFloat32, collSum, o.root, comm, req);
    if (c == "allgather") return collIallGather(s, r, n, collFloat32, comm, req);
    if (c == "reducescatter") return collIreduceScatter(s, r, n, collFloat32, collSum, comm, req);
    if (c == "alltoall") return collIallToAll(s, r, n, collFloat32, comm, req);
    if (c == "barrier") return collIbarrier(comm, req);
  } else {
    if (c == "allreduce") return collAllReduce(s, r, n, collFloat32, collSum, comm, nullptr);
    if (c == "broadcast") return collBroadcast(s, r, n, collFloat32, o.root, comm, nullptr);
    if (c == "reduce") return collReduce(s, r, n, collFloat32, collSum, o.root, comm, nullptr);
    if (c == "allgather") return collAllGather(s, r, n, collFloat32, comm, nullptr);
    if (c == "reducescatter") return collReduceScatter(s, r, n, collFloat32, collSum, comm, nullptr);
    if (c == "alltoall") return collAllToAll(s, r, n, collFloat32, comm, nullptr);
    if (c == "barrier") return collBarrier(comm);
  }
  return collInvalidArgument;
}

[[noreturn]] void die(const Options& o, int rank, int nranks, collComm_t comm, Buffers& b) {
  const int sig = o.mode == "stop" ? SIGSTOP : SIGKILL;
  if (o.coll == "sendrecv" || o.coll == "recv") {
    // The group blocks: kill this process from another thread once the transfer started.
    std::thread([rank, sig] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      killSelf(rank, "during a group of sends and receives", sig);
    }).detach();
    issue(o, comm, rank, nranks, b, nullptr);
    // A small transfer may be done before the timer: stop here, so that the peers
    // wait for this rank in their next operation.
    std::this_thread::sleep_for(std::chrono::seconds(60));
    std::abort();
  }
  collRequest_t req = nullptr;
  collResult_t rc = issue(o, comm, rank, nranks, b, &req);
  if (rc != collSuccess)
    std::fprintf(stderr, "rank %d: starting %s failed: %s\n", rank, o.coll.c_str(), collGetErrorString(rc));
  // Let the transfer get going so that the peers lose us mid-operation.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  killSelf(rank, ("during " + o.coll).c_str(), sig);
}

// The survivors' loop: returns the process exit code.
int survive(const Options& o, int rank, int nranks, collComm_t comm, Buffers& b) {
  bool hang = o.mode == "hang" || o.mode == "stop", split = o.mode == "split";
  auto start = Clock::now();
  int it = 0;
  for (; Clock::now() - start < kLoopFor; ++it) {
    auto t0 = Clock::now();
    collResult_t rc = collSuccess;
    if (split && it >= kVictimIteration) {
      if (rank == o.victim && it == kVictimIteration) {
        if (o.killMs <= 0) killSelf(rank, "instead of calling collCommSplit");
        std::thread([rank, ms = o.killMs] {
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
          killSelf(rank, "in the collCommSplit loop");
        }).detach();
      }
      // A split, then an all-reduce on the new communicator (by parity of the rank).
      collComm_t sub = nullptr;
      rc = collCommSplit(comm, rank % 2, rank, &sub);
      if (rc == collSuccess) {
        rc = collAllReduce(b.send.data(), b.recv.data(), o.count, collFloat32, collSum, sub, nullptr);
        if (rc != collSuccess) {
          int code = report(rank, rc, since(t0), it, collGetLastError(sub));
          collCommAbort(sub);
          collCommAbort(comm);
          return code;
        }
        collCommDestroy(sub);
      }
    } else {
      rc = issue(o, comm, rank, nranks, b, nullptr);
    }
    if (rc == collSuccess) continue;
    int code = report(rank, rc, since(t0), it, collGetLastError(comm));
    // With a hung peer every survivor must reach its own timeout: wait before aborting
    // (which tells the others) and exiting (which makes collectiverun stop the job).
    if (hang) std::this_thread::sleep_for(std::chrono::seconds(1));
    collCommAbort(comm);
    return code;
  }
  std::printf("rank %d: no error in %d iterations\n", rank, it);
  return kNoError;
}

// init: the victim dies inside collCommInitFromEnv, the others must not wait for it.
int initMode(const Options& o) {
  int rank = std::atoi(std::getenv("COLL_RANK") ? std::getenv("COLL_RANK") : "-1");
  int nranks = std::atoi(std::getenv("COLL_SIZE") ? std::getenv("COLL_SIZE") : "0");
  int late = o.late >= 0 ? o.late : (o.victim + 1) % nranks;
  if (rank == o.victim) {
    std::thread([rank, ms = o.killMs > 0 ? o.killMs : 300] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      killSelf(rank, "in collCommInitFromEnv");
    }).detach();
  }
  if (rank == late) std::this_thread::sleep_for(std::chrono::seconds(1));
  auto t0 = Clock::now();
  collComm_t comm = nullptr;
  collResult_t rc = collCommInitFromEnv(&comm);
  if (rank == o.victim) std::this_thread::sleep_for(std::chrono::seconds(60));
  if (rc != collSuccess) {
    int code = report(rank, rc, since(t0), 0, collGetLastError(nullptr));
    // Rank 0's process serves the rendezvous: stay until the late rank has come.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return code;
  }
  std::printf("rank %d: collCommInitFromEnv succeeded without rank %d\n", rank, o.victim);
  std::fflush(stdout);
  Options rest = o;
  rest.count = 1024;
  Buffers b = makeBuffers(rest, nranks);
  return survive(rest, rank, nranks, comm, b);
}

// hvd: the engine's synchronize must throw once a rank is gone.
int hvdMode(const Options& o) {
  namespace hvd = collective::hvd;
  try {
    hvd::init();
  } catch (const hvd::Error& e) {
    std::fprintf(stderr, "mp_fault: hvd::init failed: %s\n", e.what());
    return 2;
  }
  int rank = hvd::rank();
  std::vector<float> buf(o.count, 1.0f);
  hvd::Tensor t{buf.data(), collFloat32, {static_cast<int64_t>(o.count)}};
  auto start = Clock::now();
  int it = 0;
  for (; Clock::now() - start < kLoopFor; ++it) {
    auto t0 = Clock::now();
    try {
      hvd::Handle h = hvd::allreduce_async(t, t, "grad." + std::to_string(it % 4));
      if (rank == o.victim && it == kVictimIteration) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        killSelf(rank, "with an engine allreduce in flight");
      }
      hvd::synchronize(h);
    } catch (const hvd::Error& e) {
      int code = report(rank, e.code(), since(t0), it, e.what());
      auto t1 = Clock::now();
      try {
        hvd::shutdown();
      } catch (const hvd::Error& e2) {
        std::printf("rank %d: hvd::shutdown threw after %.3f s: %s\n", rank, since(t1), e2.what());
      }
      std::printf("rank %d: hvd::shutdown returned after %.3f s\n", rank, since(t1));
      std::fflush(stdout);
      return code;
    }
  }
  std::printf("rank %d: no error in %d iterations\n", rank, it);
  hvd::shutdown();
  return kNoError;
}

bool parse(int argc, char** argv, Options& o) {
  if (argc < 3) return false;
  o.mode = argv[1];
  if (o.mode != "die" && o.mode != "hang" && o.mode != "stop" && o.mode != "init" && o.mode != "split" &&
      o.mode != "hvd")
    return false;
  o.victim = std::atoi(argv[2]);
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--coll") o.coll = argv[i + 1];
    else if (k == "--count") o.count = std::strtoull(argv[i + 1], nullptr, 10);
    else if (k == "--root") o.root = std::atoi(argv[i + 1]);
    else if (k == "--late") o.late = std::atoi(argv[i + 1]);
    else if (k == "--kill-ms") o.killMs = std::atoi(argv[i + 1]);
    else return false;
  }
  if ((argc - 3) % 2 != 0) return false;
  static const char* kColls[] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter",
                                 "alltoall", "barrier", "sendrecv", "recv"};
  for (const char* c : kColls)
    if (o.coll == c) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: %s die|hang|stop|init|split|hvd VICTIM [--coll NAME] [--count N] "
                         "[--root R] [--late R] [--kill-ms MS]\n", argv[0]);
    return 2;
  }
  // collectiverun stops the whole job (SIGTERM, SIGKILL 3 s later) as soon as the victim
  // dies. Ignoring SIGTERM leaves those 3 s to the library to notice the loss by itself,
  // which is what this test is about.
  signal(SIGTERM, SIG_IGN);
  if (o.mode == "init") return initMode(o);
  if (o.mode == "hvd") return hvdMode(o);
  collComm_t comm = nullptr;
  collResult_t rc = collCommInitFromEnv(&comm);
  if (rc != collSuccess) {
    std::fprintf(stderr, "mp_fault: collCommInitFromEnv failed: %s: %s\n", collGetErrorString(rc),
                 collGetLastError(nullptr));
    return 2;
  }
  int rank = 0, nranks = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &nranks);
  Buffers b = makeBuffers(o, nranks);
  if (rank == o.victim && o.mode == "hang") {
    signal(SIGTERM, SIG_DFL);  // only the others wait for the launcher's SIGKILL
    std::printf("rank %d: joined, now never calling a collective\n", rank);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  if (rank == o.victim && (o.mode == "die" || o.mode == "stop")) {
    for (int it = 0; it < kVictimIteration; ++it) issue(o, comm, rank, nranks, b, nullptr);
    die(o, rank, nranks, comm, b);
  }
  return survive(o, rank, nranks, comm, b);
}
