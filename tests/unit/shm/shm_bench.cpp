// Micro-benchmark of the shm transport between two ranks (two processes by default,
// or two threads with --threads):
//
//   shm_bench lat [--iters N] [--wait spin|backoff|futex]   8-byte ping-pong, one-way
//   shm_bench bw  [--size BYTES] [--window W] [--iters N]
//       both ranks send BYTES to each other at once, split into W transfers posted
//       together; prints per-direction and aggregate bandwidth
//
// Tunables come from the environment (COLL_SHM_*). Waiting spins (each rank is meant to
// have a core); the best of 5 repetitions is printed.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "base/wait.hpp"
#include "shm_test_util.hpp"

namespace coll::shmtest {
namespace {

struct Options {
  std::string mode = "lat";
  bool threads = false;
  size_t size = 32u << 20;
  int window = 1;
  int iters = 0;
  std::string wait = "spin";
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// How a rank waits: spin only, the library's Backoff (spin, sched_yield, nanosleep),
// or spin then sleep on the link's futex (woken by the peer's next publication).
enum class Wait { Spin, Backoff, Futex };

void spinUntil(Link* link, Xfer* x, Wait wait) {
  if (wait == Wait::Spin) {
    while (!x->complete) link->progress();
    return;
  }
  Backoff backoff(2000, 200);
  while (!x->complete) {
    if (link->progress()) {
      backoff.reset();
    } else if (wait == Wait::Futex && backoff.idleCount() >= 2000) {
      link->waitActivity(1);
    } else {
      backoff.idle();
    }
  }
}

// Best and median one-way time over batches of round trips: the best batch is the
// figure for "both ranks have a core"; the median shows how much a busy host costs.
struct Lat {
  double best, median, mean;
};

Lat latency(Link* link, int rank, int iters, Wait wait) {
  uint64_t out = 1, in = 0;
  constexpr int kBatch = 200;
  std::vector<double> batches;
  for (int done = -kBatch * 10; done < iters; done += kBatch) {  // 10 warm-up batches
    double t0 = now();
    for (int i = 0; i < kBatch; ++i) {
      Xfer s{&out, 8}, r{&in, 8};
      link->postRecv(&r);
      if (rank == 0) {
        link->postSend(&s);
        spinUntil(link, &r, wait);
      } else {
        spinUntil(link, &r, wait);
        link->postSend(&s);
      }
      spinUntil(link, &s, wait);
    }
    if (done >= 0) batches.push_back((now() - t0) / kBatch / 2);
  }
  double sum = 0;
  for (double b : batches) sum += b;
  std::sort(batches.begin(), batches.end());
  return {batches.front(), batches[batches.size() / 2], sum / batches.size()};
}

double bandwidth(Link* link, const Options& o) {
  std::vector<uint8_t> out(o.size, 1), in(o.size, 0);
  size_t piece = (o.size + o.window - 1) / o.window;
  std::vector<Xfer> xs(2 * o.window);
  double best = 1e9;
  // About 64 MiB per repetition unless told otherwise.
  int iters = o.iters ? o.iters : static_cast<int>(std::clamp<size_t>((64u << 20) / std::max<size_t>(o.size, 1), 3, 20000));
  for (int rep = 0; rep < 6; ++rep) {
    double t0 = now();
    for (int it = 0; it < iters; ++it) {
      std::vector<Xfer*> all;
      for (int w = 0; w < o.window; ++w) {
        size_t off = w * piece, n = std::min(piece, o.size - off);
        xs[2 * w] = Xfer{in.data() + off, n};
        xs[2 * w + 1] = Xfer{out.data() + off, n};
        link->postRecv(&xs[2 * w]);
        link->postSend(&xs[2 * w + 1]);
        all.push_back(&xs[2 * w]);
        all.push_back(&xs[2 * w + 1]);
      }
      for (;;) {
        bool done = true;
        for (Xfer* x : all) done = done && x->complete;
        if (done) break;
        link->progress();
      }
    }
    double t = (now() - t0) / iters;
    if (rep > 0 && t < best) best = t;
  }
  return best;
}

void runRank(int fd, int rank, pid_t pid0, pid_t pid1, const Options& o, const Config& cfg) {
  PairBootstrap boot(fd, rank);
  auto owned = connectShmPair(boot, rank, pid0, pid1, "bench" + std::to_string(pid0), cfg);
  Link* link = owned.get();
  char c = 0;
  boot.allGather(&c, 1);
  if (o.mode == "lat") {
    Wait w = o.wait == "spin" ? Wait::Spin : o.wait == "backoff" ? Wait::Backoff : Wait::Futex;
    Lat t = latency(link, rank, o.iters ? o.iters : 100000, w);
    if (rank == 0)
      printf("shm 8-byte ping-pong one-way: best batch %.3f us, median batch %.3f us, mean %.3f us "
             "(%s, wait %s)\n", t.best * 1e6, t.median * 1e6, t.mean * 1e6,
             o.threads ? "threads" : "processes", o.wait.c_str());
  } else {
    double t = bandwidth(link, o);
    boot.allGather(&c, 1);
    if (rank == 0)
      printf("shm bidirectional %zu bytes each way, window %d: %.3f ms, %.2f GB/s per direction, "
             "%.2f GB/s aggregate (%s)\n", o.size, o.window, t * 1e3, o.size / t / 1e9,
             2 * o.size / t / 1e9, o.threads ? "threads" : "processes");
  }
  boot.allGather(&c, 1);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "lat" || a == "bw") o.mode = a;
    else if (a == "--threads") o.threads = true;
    else if (a == "--size") o.size = parseSize(next(), "--size");
    else if (a == "--window") o.window = std::max(1, atoi(next().c_str()));
    else if (a == "--iters") o.iters = atoi(next().c_str());
    else if (a == "--wait") o.wait = next();
    else COLL_THROW(collInvalidArgument, "unknown argument ", a);
  }
  return o;
}

int benchMain(int argc, char** argv) {
  Options o = parse(argc, argv);
  COLL_CHECK_ARG(o.wait == "spin" || o.wait == "backoff" || o.wait == "futex", "--wait ", o.wait,
                 " is not spin, backoff or futex");
  Config cfg = Config::fromEnv();
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  pid_t pid0 = getpid();
  if (o.threads) {
    std::thread t([&] { runRank(sv[1], 1, pid0, pid0, o, cfg); });
    runRank(sv[0], 0, pid0, pid0, o, cfg);
    t.join();
    return 0;
  }
  pid_t child = fork();
  if (child == 0) {
    ::close(sv[0]);
    runRank(sv[1], 1, pid0, getpid(), o, cfg);
    _exit(0);
  }
  ::close(sv[1]);
  runRank(sv[0], 0, pid0, child, o, cfg);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace
}  // namespace coll::shmtest

int main(int argc, char** argv) {
  try {
    return coll::shmtest::benchMain(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "shm_bench: %s\n", e.what());
    return 1;
  }
}
