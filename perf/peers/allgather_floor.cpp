// The memory floor of a 2-rank out-of-place all-gather on this host, with no library in
// the way: two processes, each with a send block of B bytes and an output of 2B bytes,
// time two ways of filling both outputs.
//
//   copy-then-pull   each copies its own block into its output (memcpy), then reads the
//                    peer's block out of the peer's output with process_vm_readv: the
//                    shape of a shared-memory all-gather that copies locally and then
//                    uses single-copy reads (Open MPI's vader with CMA)
//   push-and-stream  each writes its own block into the peer's output piece by piece
//                    with process_vm_writev and copies every piece into its own output
//                    right after with streaming stores, while the piece is in cache (the
//                    shm transport's push records): the send block is read once
//   mapped-push      both outputs are shared mappings (what collMemAlloc buffers are to
//                    the shm transport): each writes its block into its own output and
//                    the peer's with streaming stores, no kernel in the way
//   staged           each copies its block piece by piece into a 1 MiB ring shared with
//                    the peer (and into its own output with streaming stores, while the
//                    piece is in cache), and copies the peer's pieces out of the other
//                    ring into its output with streaming stores: the shm transport's
//                    staged path, both cores copying at once through the cache
//
// Both processes run the same variant at once, as the ranks of a job do. The ratio of
// the first variant's average to another's is the most an implementation of that other
// can gain over one of the first on this machine (at the moment: the staged variant
// depends on how fast the two cores exchange cache lines, which changes for minutes at
// a time on a shared host); perf/compare_collectives.sh prints them beside the
// all-gather comparison.
//
//   allgather_floor [bytes per rank (default 32M)] [iterations (default 20)] [piece (default 128K)]
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common.hpp"

namespace {

// memcpy with non-temporal stores; dst 16-byte aligned, n a multiple of 64.
void copyStream(char* dst, const char* src, size_t n) {
#if defined(__x86_64__)
  for (size_t i = 0; i < n; i += 64)
    for (size_t j = 0; j < 64; j += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + j),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + j)));
  _mm_sfence();
#else
  std::memcpy(dst, src, n);
#endif
}

// Shared between the two processes (an anonymous shared mapping made before fork).
struct Shared {
  std::atomic<uint64_t> arrived[2];
  std::atomic<int> failed;
  // The staged variant's rings, one per sender: bytes written and bytes taken.
  struct alignas(64) Counter {
    std::atomic<uint64_t> v;
  };
  Counter head[2], tail[2];
};
constexpr size_t kRingBytes = size_t{1} << 20;
constexpr size_t kStagePiece = size_t{32} << 10;

// Both processes arrive at the n-th barrier before either goes on; spins briefly, then
// yields (the two may share one CPU).
void barrier(Shared* sh, int rank, uint64_t n) {
  sh->arrived[rank].store(n, std::memory_order_release);
  for (int spins = 0; sh->arrived[1 - rank].load(std::memory_order_acquire) < n; ++spins) {
    if (sh->failed.load(std::memory_order_relaxed)) _exit(1);
    if (spins > 1000) sched_yield();
  }
}

bool remoteCopy(pid_t peer, char* local, char* remote, size_t n, bool write) {
  iovec l{local, n}, r{remote, n};
  ssize_t got = write ? process_vm_writev(peer, &l, 1, &r, 1, 0) : process_vm_readv(peer, &l, 1, &r, 1, 0);
  if (got == static_cast<ssize_t>(n)) return true;
  std::fprintf(stderr, "allgather_floor: process_vm_%s of %zu bytes failed: %s\n", write ? "writev" : "readv", n,
               got < 0 ? std::strerror(errno) : "short copy");
  return false;
}

struct Args {
  size_t bytes = size_t{32} << 20;
  int iters = 20;
  size_t piece = size_t{128} << 10;
};

double runVariant(bool push, const Args& a, Shared* sh, int rank, pid_t peer, char* send, char* out,
                  uint64_t& epoch) {
  char* mine = out + static_cast<size_t>(rank) * a.bytes;
  char* theirs = out + static_cast<size_t>(1 - rank) * a.bytes;  // the same address in the peer
  std::memset(out, 0, 2 * a.bytes);  // what the variant before left there proves nothing
  double total = 0;
  const int warmup = 2;
  for (int it = 0; it < warmup + a.iters; ++it) {
    barrier(sh, rank, ++epoch);
    auto t0 = std::chrono::steady_clock::now();
    bool ok = true;
    if (push) {
      for (size_t o = 0; o < a.bytes && ok; o += a.piece) {
        const size_t n = std::min(a.piece, a.bytes - o);
        ok = remoteCopy(peer, send + o, mine + o, n, true);  // our block's place in the peer
        copyStream(mine + o, send + o, n);
      }
    } else {
      std::memcpy(mine, send, a.bytes);
      barrier(sh, rank, ++epoch);  // the peer's own block is in place in its output
      for (size_t o = 0; o < a.bytes && ok; o += a.piece)
        ok = remoteCopy(peer, theirs + o, theirs + o, std::min(a.piece, a.bytes - o), false);
    }
    if (!ok) {
      sh->failed.store(1);
      _exit(1);
    }
    barrier(sh, rank, ++epoch);
    std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
    if (it >= warmup) total += dt.count();
  }
  for (int b = 0; b < 2; ++b)
    for (size_t i = 0; i < a.bytes; i += 4093)
      if (out[static_cast<size_t>(b) * a.bytes + i] != b + 1) return -1;  // block b holds rank b's pattern
  return total / a.iters;
}

// The third variant: outs[r] is rank r's output, mapped shared in both processes.
double runMapped(const Args& a, Shared* sh, int rank, const char* send, char* const outs[2], uint64_t& epoch) {
  const size_t at = static_cast<size_t>(rank) * a.bytes;
  std::memset(outs[rank], 0, 2 * a.bytes);
  double total = 0;
  const int warmup = 2;
  for (int it = 0; it < warmup + a.iters; ++it) {
    barrier(sh, rank, ++epoch);
    auto t0 = std::chrono::steady_clock::now();
    for (size_t o = 0; o < a.bytes; o += a.piece) {
      const size_t n = std::min(a.piece, a.bytes - o);
      copyStream(outs[1 - rank] + at + o, send + o, n);
      copyStream(outs[rank] + at + o, send + o, n);
    }
    barrier(sh, rank, ++epoch);
    std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
    if (it >= warmup) total += dt.count();
  }
  for (int b = 0; b < 2; ++b)
    for (size_t i = 0; i < a.bytes; i += 4093)
      if (outs[rank][static_cast<size_t>(b) * a.bytes + i] != b + 1) return -1;
  return total / a.iters;
}

// The fourth variant: rings[r] carries rank r's block to the peer.
double runStaged(const Args& a, Shared* sh, int rank, const char* send, char* out, char* const rings[2],
                 uint64_t& epoch) {
  char* mine = out + static_cast<size_t>(rank) * a.bytes;
  char* theirs = out + static_cast<size_t>(1 - rank) * a.bytes;
  std::memset(out, 0, 2 * a.bytes);
  double total = 0;
  const int warmup = 2;
  uint64_t base = 0;  // ring positions at the start of this iteration (both rings alike)
  for (int it = 0; it < warmup + a.iters; ++it) {
    barrier(sh, rank, ++epoch);
    auto t0 = std::chrono::steady_clock::now();
    size_t sent = 0, got = 0;
    for (int idle = 0; sent < a.bytes || got < a.bytes;) {
      bool moved = false;
      const size_t room = kRingBytes - (base + sent - sh->tail[rank].v.load(std::memory_order_acquire));
      if (sent < a.bytes && room >= kStagePiece) {
        const size_t n = std::min(kStagePiece, a.bytes - sent);
        std::memcpy(rings[rank] + (base + sent) % kRingBytes, send + sent, n);
        sh->head[rank].v.store(base + sent + n, std::memory_order_release);
        copyStream(mine + sent, send + sent, n);
        sent += n;
        moved = true;
      }
      const uint64_t avail = sh->head[1 - rank].v.load(std::memory_order_acquire) - (base + got);
      if (got < a.bytes && avail > 0) {
        const size_t n = std::min<size_t>(avail, kStagePiece);
        copyStream(theirs + got, rings[1 - rank] + (base + got) % kRingBytes, n);
        got += n;
        sh->tail[1 - rank].v.store(base + got, std::memory_order_release);
        moved = true;
      }
      if (moved) {
        idle = 0;
      } else {
        if (sh->failed.load(std::memory_order_relaxed)) _exit(1);
        if (++idle > 1000) sched_yield();
      }
    }
    base += a.bytes;
    barrier(sh, rank, ++epoch);
    std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
    if (it >= warmup) total += dt.count();
  }
  for (int b = 0; b < 2; ++b)
    for (size_t i = 0; i < a.bytes; i += 4093)
      if (out[static_cast<size_t>(b) * a.bytes + i] != b + 1) return -1;
  return total / a.iters;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    if (argc > 1) a.bytes = perf::parseSize(argv[1], "bytes per rank");
    if (argc > 2) a.iters = std::atoi(argv[2]);
    if (argc > 3) a.piece = perf::parseSize(argv[3], "piece");
    if (argc > 4) throw perf::UsageError("too many arguments");
    if (a.bytes < 64 || a.bytes % 64 || a.piece < 64 || a.piece % 64 || a.iters < 1)
      throw perf::UsageError("bytes and piece must be positive multiples of 64, iterations >= 1");
  } catch (const perf::UsageError& e) {
    std::fprintf(stderr,
                 "allgather_floor: %s\nusage: allgather_floor [bytes per rank] [iterations] [piece]\n",
                 e.what());
    return 2;
  }
  auto* sh = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  // Private mappings made before fork sit at the same addresses in both processes, so
  // each can name the other's output by its own pointer.
  char* send = static_cast<char*>(
      mmap(nullptr, a.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  char* out = static_cast<char*>(
      mmap(nullptr, 2 * a.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  char* outs[2];
  for (char*& o : outs)
    o = static_cast<char*>(mmap(nullptr, 2 * a.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  char* rings[2];
  for (char*& r : rings)
    r = static_cast<char*>(mmap(nullptr, kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED || send == MAP_FAILED || out == MAP_FAILED || outs[0] == MAP_FAILED ||
      outs[1] == MAP_FAILED || rings[0] == MAP_FAILED || rings[1] == MAP_FAILED) {
    std::fprintf(stderr, "allgather_floor: cannot map the buffers (%zu bytes per rank): %s\n", a.bytes, std::strerror(errno));
    return 1;
  }
  new (sh) Shared{};
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) {
    std::perror("allgather_floor: fork");
    return 1;
  }
  const int rank = child == 0 ? 1 : 0;
  const pid_t peer = child == 0 ? parent : child;
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);  // Yama: let the peer reach our memory
  std::memset(send, rank + 1, a.bytes);         // touching makes the pages our own
  uint64_t epoch = 0;
  barrier(sh, rank, ++epoch);  // both set up before either copies
  const double pull = runVariant(false, a, sh, rank, peer, send, out, epoch);
  const double push = runVariant(true, a, sh, rank, peer, send, out, epoch);
  const double mapped = runMapped(a, sh, rank, send, outs, epoch);
  const double staged = runStaged(a, sh, rank, send, out, rings, epoch);
  const bool good = pull > 0 && push > 0 && mapped > 0 && staged > 0;
  barrier(sh, rank, ++epoch);
  if (rank == 1) _exit(good ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  if (!good || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "allgather_floor: an output block holds the wrong data\n");
    return 1;
  }
  std::printf("# all-gather floor: 2 processes, %zu bytes per rank, pieces of %zu bytes, %d iterations\n",
              a.bytes, a.piece, a.iters);
  std::printf("copy-then-pull  %8.2f ms\npush-and-stream %8.2f ms\nmapped-push     %8.2f ms\nstaged          %8.2f ms\n",
              pull, push, mapped, staged);
  std::printf("floor ratio (copy-then-pull / push-and-stream): %.2fx\n", pull / push);
  std::printf("mapped floor ratio (copy-then-pull / mapped-push): %.2fx\n", pull / mapped);
  std::printf("staged floor ratio (copy-then-pull / staged): %.2fx\n", pull / staged);
  return 0;
}
