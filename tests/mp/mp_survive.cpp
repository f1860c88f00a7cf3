// One process of a job that loses ranks and grows back (driven by survive_test.py).
//
//   mp_survive --dir D --cycles C --seed S [--np N] [--in-shrink] [--proc P --join-cycle K]
//
// Every cycle, on a communicator of N ranks: a few checked collectives, during which one
// or two ranks (chosen from the seed and the cycle alike on every rank; rank 0 included)
// kill themselves with SIGKILL. The survivors see the call fail, revoke, find the dead
// with collCommGetFailedRanks (which must name exactly the victims), shrink, check a call
// on the shrunk communicator, and grow back to N: its rank 0 writes the grow id to
// D/grow-<cycle> and the driver starts the new processes (--proc, --join-cycle), which join
// with COLL_JOIN_ID. --in-shrink: every fourth cycle one more survivor dies while the others
// shrink, and they must shrink again without it. Each process that lives through several
// cycles checks at the end that its descriptors and threads did not grow.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "collective.h"

namespace {

int g_proc = 0;

[[noreturn]] void fail(const std::string& what) {
  fprintf(stderr, "proc %d: FAIL: %s\n", g_proc, what.c_str());
  fflush(stderr);
  _exit(1);
}

void check(collResult_t rc, const char* what, collComm_t comm) {
  if (rc != collSuccess) fail(std::string(what) + ": " + collGetErrorString(rc) + ": " + collGetLastError(comm));
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Plan {
  std::vector<int> victims;  // ranks (of the cycle's communicator) that die in the calls
  int killAt = 0;            // call index at which they die
  int calls = 0;
  int inShrink = -1;         // rank that dies while the others shrink
};

Plan planFor(uint64_t seed, int cycle, int n, bool inShrink) {
  Plan p;
  uint64_t h = mix(seed * 1000003 + cycle);
  const int nv = (cycle % 3 == 2 && n >= 4) ? 2 : 1;
  if (cycle == 0) p.victims.push_back(0);  // the rank whose process hosts the original root
  while (static_cast<int>(p.victims.size()) < nv) {
    h = mix(h);
    const int r = static_cast<int>(h % n);
    bool dup = false;
    for (int v : p.victims) dup |= v == r;
    if (!dup) p.victims.push_back(r);
  }
  h = mix(h);
  p.calls = 3 + static_cast<int>(h % 4);
  p.killAt = static_cast<int>((h >> 8) % p.calls);
  if (inShrink && cycle % 4 == 3 && n - nv >= 3) {
    // The highest survivor: not the one that hosts the new rendezvous.
    for (int r = n - 1; r >= 0; --r) {
      bool victim = false;
      for (int v : p.victims) victim |= v == r;
      if (!victim) { p.inShrink = r; break; }
    }
  }
  return p;
}

int countFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n - 3;  // ., .. and the directory's own descriptor
}

int countThreads() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return atoi(line.c_str() + 8);
  return -1;
}

// One checked call, chosen by (cycle, index): its result must match the reference, or it
// fails (returned, for the caller to recover).
collResult_t checkedCall(collComm_t comm, int cycle, int index, const std::vector<int>& procs) {
  int rank = 0, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  const uint64_t h = mix(cycle * 131 + index);
  const size_t count = 1 + h % 20000;
  collResult_t rc;
  switch (h % 3) {
    case 0: {  // all-reduce: every element sums (proc+1)*(i%7+1) over the ranks
      std::vector<int32_t> in(count), out(count, -1);
      for (size_t i = 0; i < count; ++i) in[i] = (procs[rank] + 1) * static_cast<int32_t>(i % 7 + 1);
      rc = collAllReduce(in.data(), out.data(), count, collInt32, collSum, comm, nullptr);
      if (rc != collSuccess) return rc;
      int64_t s = 0;
      for (int p : procs) s += p + 1;
      for (size_t i = 0; i < count; ++i)
        if (out[i] != s * static_cast<int32_t>(i % 7 + 1))
          fail("all-reduce: element " + std::to_string(i) + " is " + std::to_string(out[i]));
      return rc;
    }
    case 1: {  // broadcast from a root chosen by h
      const int root = static_cast<int>((h >> 4) % n);
      std::vector<float> buf(count, -1.f);
      if (rank == root)
        for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(i % 1000) + cycle;
      rc = collBroadcast(buf.data(), buf.data(), count, collFloat32, root, comm, nullptr);
      if (rc != collSuccess) return rc;
      for (size_t i = 0; i < count; ++i)
        if (buf[i] != static_cast<float>(i % 1000) + cycle)
          fail("broadcast (cycle " + std::to_string(cycle) + ", call " + std::to_string(index) + ", root " +
               std::to_string(root) + " of " + std::to_string(n) + ", " + std::to_string(count) + " floats): element " +
               std::to_string(i) + " is " + std::to_string(buf[i]));
      return rc;
    }
    default: {  // all-gather of each rank's proc id
      const size_t c = 1 + count % 512;
      std::vector<int32_t> in(c, procs[rank]), out(c * n, -1);
      rc = collAllGather(in.data(), out.data(), c, collInt32, comm, nullptr);
      if (rc != collSuccess) return rc;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i)
          if (out[r * c + i] != procs[r]) fail("all-gather: block of rank " + std::to_string(r));
      return rc;
    }
  }
}

// Every rank's proc id, in rank order (the renumbering every rank must agree on).
std::vector<int> gatherProcs(collComm_t comm, collResult_t* rc) {
  int n = 0;
  collCommCount(comm, &n);
  std::vector<int32_t> all(n, -1);
  const int32_t mine = g_proc;
  *rc = collAllGather(&mine, all.data(), 1, collInt32, comm, nullptr);
  return std::vector<int>(all.begin(), all.end());
}

// The failed ranks once the answer holds still for a while (at most 3 s).
std::vector<int> settledFailures(collComm_t comm, size_t atLeast) {
  std::vector<int> last;
  int same = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < until) {
    int ranks[64], n = 0;
    check(collCommGetFailedRanks(comm, ranks, 64, &n), "collCommGetFailedRanks", comm);
    std::vector<int> now(ranks, ranks + std::min(n, 64));
    if (now == last && now.size() >= atLeast) {
      if (++same >= 2) return now;
    } else {
      same = 0;
      last = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  return last;
}

std::string list(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return "{" + s + "}";
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int cycles = 3, np = 4, joinCycle = -1;
  uint64_t seed = 1;
  bool inShrink = false;
  g_proc = getenv("COLL_RANK") ? atoi(getenv("COLL_RANK")) : 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { if (i + 1 >= argc) fail("missing value for " + a); return std::string(argv[++i]); };
    if (a == "--dir") dir = next();
    else if (a == "--cycles") cycles = std::stoi(next());
    else if (a == "--seed") seed = std::stoull(next());
    else if (a == "--np") np = std::stoi(next());
    else if (a == "--proc") g_proc = std::stoi(next());
    else if (a == "--join-cycle") joinCycle = std::stoi(next());
    else if (a == "--in-shrink") inShrink = true;
    else fail("unknown argument " + a);
  }
  if (dir.empty() && getenv("COLL_ELASTIC_DIR")) dir = getenv("COLL_ELASTIC_DIR");  // collectiverun --elastic
  if (dir.empty()) fail("--dir (or COLL_ELASTIC_DIR) is required");
  const bool joiner = getenv("COLL_JOIN_ID") != nullptr;
  if (joiner && joinCycle < 0) g_proc = static_cast<int>(getpid());  // started by collectiverun
  const auto t0 = std::chrono::steady_clock::now();
  collComm_t comm = nullptr;
  check(collCommInitFromEnv(&comm), "collCommInitFromEnv", nullptr);
  collResult_t rc;
  // Every cycle starts by checking its communicator (the first, or the grown one): the
  // cycle's number from rank 0, everyone's proc id, one call. A victim of the cycle may die
  // right after those and fail them on slower ranks: they are calls of the cycle.
  bool skipBcast = false;
  int firstCycle = 0;
  std::vector<int> procs;
  if (joiner && joinCycle < 0) {  // started by collectiverun: learn the cycle
    int32_t c = -1;
    check(collBroadcast(&c, &c, 1, collInt32, 0, comm, nullptr), "broadcast of the cycle", comm);
    firstCycle = c;
    skipBcast = true;
  } else if (joiner) {
    firstCycle = joinCycle + 1;
  }
  bool pendingCheck = true;
  auto startCheck = [&](int cycle) {
    collResult_t r = collSuccess;
    if (!skipBcast) {
      int32_t c = cycle;
      r = collBroadcast(&c, &c, 1, collInt32, 0, comm, nullptr);
      if (r == collSuccess && c != cycle) fail("rank 0 is in cycle " + std::to_string(c) + ", this rank in " + std::to_string(cycle));
    }
    skipBcast = false;
    if (r == collSuccess) procs = gatherProcs(comm, &r);
    if (r == collSuccess) r = checkedCall(comm, cycle, 98, procs);
    pendingCheck = false;
    return r;
  };
  int baseFds = -1, baseThreads = -1, seen = 0;
  for (int cycle = firstCycle; cycle < cycles; ++cycle) {
    int rank = 0, n = 0;
    collCommUserRank(comm, &rank);
    collCommCount(comm, &n);
    if (n != np) fail("cycle " + std::to_string(cycle) + " starts with " + std::to_string(n) + " ranks");
    if (seen++ == 1) { baseFds = countFds(); baseThreads = countThreads(); }
    const Plan plan = planFor(seed, cycle, n, inShrink);
    bool victim = false;
    for (int v : plan.victims) victim |= v == rank;
    collResult_t bad = pendingCheck ? startCheck(cycle) : collSuccess;
    for (int call = 0; call < plan.calls && bad == collSuccess; ++call) {
      if (call == plan.killAt && victim) {
        if (rank == plan.victims[0]) {  // when the kill happened, for the recovery figures
          FILE* f = fopen((dir + "/kill-" + std::to_string(cycle)).c_str(), "w");
          if (f) {
            fprintf(f, "%lld\n", static_cast<long long>(std::chrono::steady_clock::now().time_since_epoch().count()));
            fclose(f);
          }
        }
        raise(SIGKILL);
      }
      bad = checkedCall(comm, cycle, call, procs);
    }
    // A victim whose call failed first (the other victim went before it) dies all the same.
    if (victim) raise(SIGKILL);
    if (bad == collSuccess) {
      // A broadcast or a gather need not reach a dead leaf; a sum needs every rank.
      int32_t x = 1;
      bad = collAllReduce(&x, &x, 1, collInt32, collSum, comm, nullptr);
      if (bad == collSuccess) fail("an all-reduce with dead ranks succeeded on rank " + std::to_string(rank));
    }
    if (bad != collRemoteError && bad != collTimeout && bad != collRevoked)
      fail(std::string("the call with a dead peer returned ") + collGetErrorString(bad));
    const auto tDetected = std::chrono::steady_clock::now();
    check(collCommRevoke(comm), "collCommRevoke", comm);
    // After a revoke every call fails at once with collRevoked.
    int32_t one = 1;
    if (collAllReduce(&one, &one, 1, collInt32, collSum, comm, nullptr) != collRevoked)
      fail("a call on a revoked communicator did not return collRevoked");
    std::vector<int> expect = plan.victims;
    std::sort(expect.begin(), expect.end());
    std::vector<int> failed = settledFailures(comm, expect.size());
    std::vector<int> early = expect;  // the rank to die in the shrink may be gone already
    if (plan.inShrink >= 0) early.push_back(plan.inShrink);
    std::sort(early.begin(), early.end());
    if (failed != expect && failed != early) fail("cycle " + std::to_string(cycle) + ": failed ranks " + list(failed) + ", expected " + list(expect));
    const double tFailed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Shrink (again, when a survivor dies meanwhile).
    collComm_t shrunk = nullptr;
    bool inShrinkDone = plan.inShrink < 0;
    for (int attempt = 0;; ++attempt) {
      if (attempt == 12) fail("no shrink succeeded in 12 attempts");
      if (!inShrinkDone && rank == plan.inShrink)
        std::thread([ms = 20 + cycle * 7 % 80] {
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
          raise(SIGKILL);
        }).detach();
      rc = collCommShrink(comm, failed.data(), static_cast<int>(failed.size()), &shrunk);
      // A shrink faster than the timer: die before the first call on the new communicator.
      if (!inShrinkDone && rank == plan.inShrink) raise(SIGKILL);
      if (rc == collSuccess) {
        int32_t one = 1;
        int sn = 0;
        collCommCount(shrunk, &sn);
        rc = collAllReduce(&one, &one, 1, collInt32, collSum, shrunk, nullptr);
        const auto tFirst = std::chrono::steady_clock::now();
        if (rc == collSuccess && one != sn) fail("the first all-reduce on the shrunk communicator gave " + std::to_string(one));
        std::vector<int> shrunkProcs;
        if (rc == collSuccess) shrunkProcs = gatherProcs(shrunk, &rc);
        if (rc == collSuccess) rc = checkedCall(shrunk, cycle, 50 + attempt, shrunkProcs);
        if (rc == collSuccess) {
          procs = shrunkProcs;
          long long killNs = 0;
          if (FILE* f = fopen((dir + "/kill-" + std::to_string(cycle)).c_str(), "r")) {
            if (fscanf(f, "%lld", &killNs) != 1) killNs = 0;
            fclose(f);
          }
          int sr = -1;
          collCommUserRank(shrunk, &sr);
          if (killNs && sr == 0 && plan.inShrink < 0) {
            auto ms = [&](std::chrono::steady_clock::time_point t) {
              return (t.time_since_epoch().count() - killNs) / 1e6;
            };
            printf("recovery cycle %d, %d -> %zu ranks: failure seen %.1f ms after the kill, first all-reduce on "
                   "the shrunk communicator %.1f ms after it (%.1f ms beyond detection)\n",
                   cycle, n, shrunkProcs.size(), ms(tDetected), ms(tFirst), ms(tFirst) - ms(tDetected));
            fflush(stdout);
          }
          break;
        }
        collCommDestroy(shrunk);
        shrunk = nullptr;
      }
      fprintf(stderr, "proc %d: shrink attempt %d failed at %.2f s: %s: %s\n", g_proc, attempt,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), collGetErrorString(rc),
              collGetLastError(nullptr));
      if (rc != collRemoteError && rc != collTimeout && rc != collRevoked && rc != collInvalidUsage)
        fail(std::string("shrink attempt returned ") + collGetErrorString(rc) + ": " + collGetLastError(comm));
      inShrinkDone = true;
      failed = settledFailures(comm, failed.size() + 1);
    }
    if (plan.inShrink >= 0) {
      expect.push_back(plan.inShrink);
      std::sort(expect.begin(), expect.end());
      if (failed != expect) fail("after the failure in the shrink: failed " + list(failed) + ", expected " + list(expect));
    }
    const double tShrunk = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    collCommDestroy(comm);
    // Grow back to np.
    int sn = 0, srank = 0;
    collCommCount(shrunk, &sn);
    collCommUserRank(shrunk, &srank);
    const int nNew = np - sn;
    if (srank == 0) {
      collUniqueId id;
      check(collCommGetGrowId(shrunk, &id), "collCommGetGrowId", shrunk);
      std::string hex;
      for (unsigned char ch : id.internal) {
        char b[3];
        snprintf(b, sizeof b, "%02x", ch);
        hex += b;
      }
      const std::string tmp = dir + "/.grow-" + std::to_string(cycle), path = dir + "/grow-" + std::to_string(cycle);
      FILE* f = fopen(tmp.c_str(), "w");
      if (!f) fail("cannot write " + tmp);
      fprintf(f, "%d %d %s\n", nNew, np, hex.c_str());
      fclose(f);
      rename(tmp.c_str(), path.c_str());
    }
    collComm_t grown = nullptr;
    check(collCommGrow(shrunk, nNew, &grown), "collCommGrow", shrunk);
    collCommDestroy(shrunk);
    comm = grown;
    pendingCheck = true;
    fprintf(stderr, "proc %d: cycle %d: failures known at %.2f s, shrunk at %.2f s, done at %.2f s\n", g_proc, cycle, tFailed, tShrunk,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (pendingCheck) check(startCheck(cycles), "the check of the last grown communicator", comm);
  check(collBarrier(comm), "final barrier", comm);
  int rank = 0;
  collCommUserRank(comm, &rank);
  check(collCommDestroy(comm), "collCommDestroy", nullptr);
  if (baseFds >= 0) {
    // Roots and other ranks' last words may take a moment to finish after the destroy.
    int fds = countFds(), threads = countThreads();
    for (int i = 0; i < 100 && (fds > baseFds + 2 || threads > baseThreads); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      fds = countFds();
      threads = countThreads();
    }
    if (fds > baseFds + 2 || threads > baseThreads)
      fail("leak over " + std::to_string(seen) + " cycles: descriptors " + std::to_string(baseFds) + " -> " +
           std::to_string(fds) + ", threads " + std::to_string(baseThreads) + " -> " + std::to_string(threads));
  }
  printf("proc %d: OK, final rank %d, %d cycles seen, %.1f s\n", g_proc, rank, seen,
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}
