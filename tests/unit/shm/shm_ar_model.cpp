// What a single-host 2-rank float32 sum all-reduce can reach over the shm transport, as
// evidence for choosing a fast path (two processes via fork):
//
//   shm_ar_model [--size BYTES] [--chunk BYTES] [--depth D]
//
//   ring    the schedule of algorithms/allreduce/ring.cpp for 2 ranks, on ShmLinks:
//           send my copy of the peer's half, receive the peer's copy of my half into a
//           scratch slot, reduce into the output, then exchange the reduced halves
//   fused   one pass per chunk of my half: process_vm_readv the peer's input chunk into
//           an L2-sized slot, reduce into my output, process_vm_writev that output chunk
//           (still in cache) straight into the peer's output; one 8-byte message at the
//           end says "done". No second exchange, no second read of the output.
//
// Prints busbw = size / time (for 2 ranks busbw equals algbw), best of 5.
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/reduce.hpp"
#include "shm_test_util.hpp"

namespace coll::shmtest {
namespace {

struct Opt {
  size_t size = 64u << 20;
  size_t chunk = 512u << 10;
  int depth = 4;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void waitAll(Link* l, std::vector<Xfer>& xs) {
  for (;;) {
    bool done = true;
    for (Xfer& x : xs) done = done && x.complete;
    if (done) return;
    l->progress();
  }
}

// One half-exchange of `bytes` in chunks with `depth` in flight; reduce when `local`.
void exchangeHalf(Link* l, const Opt& o, const float* sendFrom, float* into, const float* local,
                  float* slots, size_t bytes) {
  size_t chunks = (bytes + o.chunk - 1) / o.chunk;
  std::vector<Xfer> sx(chunks), rx(chunks);
  size_t posted = 0, done = 0;
  while (done < chunks) {
    while (posted < chunks && posted - done < static_cast<size_t>(o.depth)) {
      size_t off = posted * o.chunk, n = std::min(o.chunk, bytes - off);
      char* dst = local ? reinterpret_cast<char*>(slots) + (posted % o.depth) * o.chunk
                        : reinterpret_cast<char*>(into) + off;
      rx[posted] = Xfer{dst, n};
      sx[posted] = Xfer{const_cast<char*>(reinterpret_cast<const char*>(sendFrom)) + off, n};
      l->postRecv(&rx[posted]);
      l->postSend(&sx[posted]);
      ++posted;
    }
    l->progress();
    while (done < posted && rx[done].complete) {
      if (local) {
        size_t off = done * o.chunk, n = std::min(o.chunk, bytes - off);
        const float* slot = slots + (done % o.depth) * (o.chunk / 4);
        reduceBuffers(into + off / 4, local + off / 4, slot, n / 4, collFloat32, collSum);
      }
      ++done;
    }
  }
  waitAll(l, sx);
}

void ringAllReduce(Link* l, int rank, const Opt& o, const float* in, float* out, float* slots) {
  size_t half = o.size / 2;
  size_t mine = rank * half / 4, theirs = (1 - rank) * half / 4;
  exchangeHalf(l, o, in + theirs, out + mine, in + mine, slots, half);
  exchangeHalf(l, o, out + mine, out + theirs, nullptr, nullptr, half);
}

void fusedAllReduce(Link* l, int rank, pid_t peer, const Opt& o, const float* in, float* out,
                    float* slot, uint64_t peerIn, uint64_t peerOut) {
  size_t half = o.size / 2, mine = rank * half;
  for (size_t off = 0; off < half; off += o.chunk) {
    size_t n = std::min(o.chunk, half - off);
    iovec l1{slot, n}, r1{reinterpret_cast<void*>(peerIn + mine + off), n};
    if (process_vm_readv(peer, &l1, 1, &r1, 1, 0) != static_cast<ssize_t>(n)) COLL_THROW(collSystemError, "readv");
    float* dst = out + (mine + off) / 4;
    reduceBuffers(dst, in + (mine + off) / 4, slot, n / 4, collFloat32, collSum);
    iovec l2{dst, n}, r2{reinterpret_cast<void*>(peerOut + mine + off), n};
    if (process_vm_writev(peer, &l2, 1, &r2, 1, 0) != static_cast<ssize_t>(n)) COLL_THROW(collSystemError, "writev");
  }
  uint64_t token = 1, got = 0;  // "my half of your output is written"
  std::vector<Xfer> xs = {Xfer{&got, 8}, Xfer{&token, 8}};
  l->postRecv(&xs[0]);
  l->postSend(&xs[1]);
  waitAll(l, xs);
}

void runRank(int fd, int rank, pid_t pid0, pid_t pid1, const Opt& o) {
  Config cfg = Config::fromEnv();
  PairBootstrap boot(fd, rank);
  auto link = connectShmPair(boot, rank, pid0, pid1, "armodel" + std::to_string(pid0), cfg);
  Link* l = link.get();
  std::vector<float> in(o.size / 4, 1.0f + rank), out(o.size / 4, 0), slots(o.depth * o.chunk / 4);
  uint64_t addrs[2] = {reinterpret_cast<uint64_t>(in.data()), reinterpret_cast<uint64_t>(out.data())};
  std::vector<uint8_t> all = boot.allGather(addrs, sizeof addrs);
  uint64_t peerAddrs[2];
  std::memcpy(peerAddrs, all.data() + (1 - rank) * sizeof addrs, sizeof addrs);
  pid_t peer = rank == 0 ? pid1 : pid0;
  for (int variant = 0; variant < 2; ++variant) {
    double best = 1e9;
    for (int rep = 0; rep < 6; ++rep) {
      std::fill(out.begin(), out.end(), 0.0f);
      char c = 0;
      boot.allGather(&c, 1);
      double t0 = now();
      if (variant == 0) ringAllReduce(l, rank, o, in.data(), out.data(), slots.data());
      else fusedAllReduce(l, rank, peer, o, in.data(), out.data(), slots.data(), peerAddrs[0], peerAddrs[1]);
      double t = now() - t0;
      if (rep > 0) best = std::min(best, t);
      for (size_t i = 0; i < out.size(); i += 4097)
        if (out[i] != 3.0f) COLL_THROW(collInternalError, "wrong result at ", i, ": ", out[i]);
    }
    char c = 0;
    boot.allGather(&c, 1);
    if (rank == 0)
      printf("2-rank all-reduce %zu bytes, %s: %.2f ms, busbw %.2f GB/s\n", o.size,
             variant == 0 ? "ring (links)" : "fused (cma read+reduce+write)", best * 1e3,
             o.size / best / 1e9);
  }
}

}  // namespace
}  // namespace coll::shmtest

int main(int argc, char** argv) {
  using namespace coll::shmtest;
  Opt o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--size") o.size = coll::parseSize(argv[i + 1], "--size");
    else if (a == "--chunk") o.chunk = coll::parseSize(argv[i + 1], "--chunk");
    else if (a == "--depth") o.depth = std::max(1, atoi(argv[i + 1]));
  }
  o.size &= ~size_t{4095};  // whole floats, halves split evenly
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  pid_t pid0 = getpid();
  pid_t child = fork();
  try {
    if (child == 0) {
      ::close(sv[0]);
      runRank(sv[1], 1, pid0, getpid(), o);
      _exit(0);
    }
    ::close(sv[1]);
    runRank(sv[0], 0, pid0, child, o);
  } catch (const std::exception& e) {
    fprintf(stderr, "shm_ar_model: %s\n", e.what());
    if (child == 0) _exit(1);
    return 1;
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
