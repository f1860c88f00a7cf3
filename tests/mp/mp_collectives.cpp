// One rank of the multi-process collective test. Start it with collectiverun, mpirun or
// by hand with the COLL_* variables (doc/launch.md); every rank runs the same phases in
// the same order and checks its own results exactly.
//
//   mp_collectives [--quick] [--sample]
//     --quick   counts up to 1001 only, no 1 MiB cases
//     --sample  every type, op and placement still, but each at one count (in rotation
//               over all the counts) instead of at every count: for 4 and more ranks,
//               where each collective costs more on a small machine
//
// Exit codes: 0 all checks passed, 1 a check failed (the message says which and where),
// 2 the communicator could not be created.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "mp_util.hpp"

namespace {

struct Phase {
  const char* name;
  void (*run)(mp::Ctx&);
};

constexpr Phase kPhases[] = {
    {"reductions", mp::runReductionTests},
    {"float agreement", mp::runFloatAgreementTests},
    {"data movement", mp::runMovementTests},
    {"send/recv", mp::runPointToPointTests},
    {"barrier, split, nonblocking", mp::runCommTests},
};

int usage(const char* prog) {
  std::fprintf(stderr, "usage: %s [--quick] [--sample]\n", prog);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  mp::Ctx ctx;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) ctx.quick = true;
    else if (std::strcmp(argv[i], "--sample") == 0) ctx.sample = true;
    else return usage(argv[0]);
  }
  collResult_t rc = collCommInitFromEnv(&ctx.comm);
  if (rc != collSuccess) {
    std::fprintf(stderr, "mp_collectives: collCommInitFromEnv failed: %s: %s\n",
                 collGetErrorString(rc), collGetLastError(nullptr));
    return 2;
  }
  collCommUserRank(ctx.comm, &ctx.rank);
  collCommCount(ctx.comm, &ctx.nranks);
  const char* phase = "start";
  try {
    for (const Phase& p : kPhases) {
      phase = p.name;
      auto t0 = std::chrono::steady_clock::now();
      p.run(ctx);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (ctx.rank == 0) std::printf("phase %-28s %7.2f s\n", p.name, s);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED in phase '%s': %s\n", ctx.rank, phase, e.what());
    std::fflush(stderr);
    collCommAbort(ctx.comm);  // wakes the other ranks with an error instead of a hang
    return 1;
  }
  if (collCommDestroy(ctx.comm) != collSuccess) {
    std::fprintf(stderr, "rank %d: FAILED: collCommDestroy: %s\n", ctx.rank, collGetLastError(nullptr));
    return 1;
  }
  std::printf("rank %d of %d: OK, %ld results checked\n", ctx.rank, ctx.nranks, ctx.checks);
  // Rank 0 serves the job's rendezvous from its own process; the others may still be
  // finishing the last operation. Lingering keeps this test about the collectives: what
  // happens when rank 0 leaves first is the exit-early-* tests' subject.
  if (ctx.rank == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  return 0;
}
