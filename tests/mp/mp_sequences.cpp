// The random call sequences of collectives-sequences (tests/unit/collectives/
// sequences.hpp) with one process per rank: the shared-memory transport between processes
// (staged, streamed and single-copy messages, chosen by measurement as the sequence runs),
// launchers, and simulated hosts whose ranks mix shm and tcp peers and run the
// hierarchical algorithms. Each rank checks its own outputs; all-reduce outputs are
// compared across the ranks of a communicator by a hash of their bits, all-gathered.
//
//   mp_sequences [--seed S] [--steps N] [--kill RANK:STEP | --freeze RANK:STEP]
//
// Prints "rank R of N: OK, ..." and exits 0, or names the first wrong step and exits 1.
// --kill: rank RANK raises SIGKILL as step STEP begins, and the others, which must not
// hang, print "rank R: detected failure after T s in step N: ..." (T from the start of
// their step N) and exit 1. SIGTERM is ignored then: collectiverun stops the job as
// soon as a rank dies (SIGTERM, SIGKILL 3 s later), which leaves the survivors 3 s to
// notice by themselves (sequences_fault.py checks it). --freeze: the rank stops itself
// (SIGSTOP) instead, alive with its connections open, and the others must time out.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sequences.hpp"

using namespace testing_coll::seq;

namespace {

uint64_t fnv(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  int steps = 200, victim = -1, killStep = -1;
  bool freeze = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 10);
    else if (a == "--steps" && i + 1 < argc) steps = atoi(argv[++i]);
    else if ((a == "--kill" || a == "--freeze") && i + 1 < argc &&
             sscanf(argv[++i], "%d:%d", &victim, &killStep) == 2 && victim >= 0 && killStep >= 0) {
      freeze = a == "--freeze";
    } else {
      fprintf(stderr, "usage: %s [--seed S] [--steps N] [--kill RANK:STEP | --freeze RANK:STEP]\n", argv[0]);
      return 2;
    }
  }
  if (victim >= 0) signal(SIGTERM, SIG_IGN);
  collComm_t world = nullptr;
  if (collCommInitFromEnv(&world) != collSuccess) {
    fprintf(stderr, "mp_sequences: collCommInitFromEnv failed: %s\n", collGetLastError(nullptr));
    return 1;
  }
  int r = 0, n = 1;
  collCommUserRank(world, &r);
  collCommCount(world, &n);
  std::string firstFailure;
  auto fail = [&](const std::string& m) {
    if (firstFailure.empty()) firstFailure = m;
  };
  long checked = 0, hashed = 0;
  const std::vector<uint64_t> seeds = stepSeeds(seed, steps);
  std::chrono::steady_clock::time_point stepStart;
  int failedStep = -1;
  for (int step = 0; step < steps && firstFailure.empty(); ++step) {
    if (r == victim && step == killStep) {
      printf("rank %d: %s itself as step %d begins\n", r, freeze ? "stopping" : "killing", step);
      fflush(stdout);
      if (freeze) signal(SIGTERM, SIG_DFL);  // the launcher's SIGKILL ends it
      raise(freeze ? SIGSTOP : SIGKILL);
    }
    stepStart = std::chrono::steady_clock::now();
    failedStep = step;
    const std::string where = "step " + std::to_string(step) + " rank " + std::to_string(r) + ": ";
    StepOut out;
    runStep(seeds[step], world, r, n, where, out, fail);
    collComm_t comm = out.sub ? out.sub : world;
    for (size_t i = 0; i < out.calls.size(); ++i) {
      const Call& c = out.calls[i];
      const std::string bad = check(c, out.rank, out.size, *out.bufs[i]);
      ++checked;
      if (!bad.empty()) fail(where + (out.split ? "(split) " : "") + describe(c) + ": " + bad);
      if (c.k != K::AllReduce) continue;
      // Every rank of the communicator has the same calls: all of them hash.
      uint64_t mine = fnv(out.bufs[i]->recv, c.count * collTypeSize(c.dt));
      std::vector<uint64_t> all(out.size);
      if (collAllGather(&mine, all.data(), 1, collUint64, comm, nullptr) != collSuccess) {
        fail(where + "all-gather of the result hashes: " + collGetLastError(comm));
        break;
      }
      ++hashed;
      for (int p = 0; p < out.size; ++p)
        if (all[p] != mine) fail(where + describe(c) + ": all-reduce bits differ from rank " + std::to_string(p) + "'s");
    }
    if (out.sub && collCommDestroy(out.sub) != collSuccess) fail(where + "destroying the split communicator");
  }
  if (!firstFailure.empty() && victim >= 0) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - stepStart).count();
    printf("rank %d: detected failure after %.2f s in step %d: %s\n", r, secs, failedStep, firstFailure.c_str());
    fflush(stdout);
    collCommAbort(world);
    return 1;
  }
  if (!firstFailure.empty()) {
    fprintf(stderr, "rank %d: FAILED: %s\n", r, firstFailure.c_str());
    collCommAbort(world);
    return 1;
  }
  if (collCommDestroy(world) != collSuccess) {
    fprintf(stderr, "rank %d: FAILED: collCommDestroy: %s\n", r, collGetLastError(nullptr));
    return 1;
  }
  printf("rank %d of %d: OK, seed %llu, %d steps, %ld results checked, %ld all-reduce hashes compared\n", r, n,
         static_cast<unsigned long long>(seed), steps, checked, hashed);
  return 0;
}
