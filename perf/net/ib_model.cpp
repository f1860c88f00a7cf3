// ib_model: what the InfiniBand backend's two paths cost on a real port, from counts
// measured on the fake fabric. There is no RDMA NIC here, so the backend runs its real
// protocol over the in-process fake NICs (tests/unit/net_ib), and its counters and the
// fabric's say what each message cost: payload bytes the CPU copied, bytes the NICs
// moved, messages. A cost model turns those counts into time on a port:
//
//   eager, S bytes in n slot pieces of p = S/n (copy in, wire, copy out, pipelined):
//       t = a + p/Bc + p/Bw + p/Bc + (n-1) * max(p/Bc, p/Bw)      (copies as counted)
//   zero-copy (the region's trip to the sender, then the data; both sides look their
//   buffer up in the registration cache and check its pages):
//       t = 2a + W/Bw + 2h + P * tc
//   all-reduce of S bytes on N ranks, per rank: W bytes on the wire, C copied, m messages
//   of which z zero-copy, P pages checked; the wire and the copies overlap (pipelined),
//   the cache's work is on the rank's core too, and the latency is that of a ring's
//   2(N-1) dependent steps, each a trip longer where its message is zero-copy:
//       t = max(W/Bw, C/Bc) + 2(N-1) * a * (1 + z/m) + 2z * h + P * tc
//       busbw = 2(N-1)/N * S / t
//
// Bc: one core's copy bandwidth (--copy-gbs; this machine's memcpy is printed beside),
// Bw: the port's data rate (--wire-gbs: NDR 400 Gb/s carries 46-48 GB/s of payload in
// nccl-tests), a: one-way latency (--latency-us), tc: one page check and h: the rest of
// a cache hit, both measured here on /proc/self/pagemap, fastest of 5 runs (tc is 0 on a
// NIC with on-demand paging). Reductions are left out: both
// paths do the same ones. Each configuration runs in a child process (the backend reads
// its tunables once per process).
//
// usage: ib_model [--bytes 16M] [--ranks 2,4,8,16] [--wire-gbs 48] [--copy-gbs 10]
//                 [--latency-us 2] [--check-ns N] [--hit-us H] (N, H default: measured)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "collective.h"
#include "base/config.hpp"
#include "tests/unit/net_ib/fake_verbs.hpp"
#include "transport/net/ib/ib_counters.hpp"
#include "transport/net/ib/ib_mem.hpp"
#include "transport/net/ib/verbs_ops.hpp"
#include "transport/net/net_backend.hpp"

namespace {

namespace ib = coll::net::ib;
namespace fake = coll::net::ib::fake;
using Clock = std::chrono::steady_clock;

struct Params {
  size_t bytes = 16 << 20;
  std::vector<int> ranks = {2, 4, 8, 16};
  double wire = 48e9, copy = 10e9, alpha = 2e-6, checkNs = -1;
  double hitUs = -1;
  double hit = 0;  // --hit-us, else measured
};

// What one message or one rank's share of a collective cost, as counted.
struct Cost {
  double copied = 0, wire = 0, msgs = 0, zmsgs = 0, pages = 0, payload = 0;
};

double eagerTime(const Params& p, double size, double chunk, const Cost& c) {
  const double n = std::max(1.0, std::ceil(size / chunk)), piece = size / n;
  const double perByteCopy = size > 0 ? c.copied / (2 * size) : 1;  // per side, as counted
  const double cp = piece * perByteCopy / p.copy, wp = piece / p.wire;
  return p.alpha + 2 * cp + wp + (n - 1) * std::max(cp, wp);
}
double zcopyTime(const Params& p, const Cost& c, double tc) {
  return 2 * p.alpha + c.wire / p.wire + 2 * p.hit + c.pages * tc;
}
double collectiveTime(const Params& p, int n, const Cost& c, double tc) {
  const double steps = 2.0 * (n - 1), zfrac = c.msgs > 0 ? c.zmsgs / c.msgs : 0;
  return std::max(c.wire / p.wire, c.copied / p.copy) + steps * p.alpha * (1 + zfrac) + 2 * c.zmsgs * p.hit +
         c.pages * tc;
}

std::vector<double> sorted(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// This machine's memcpy of 64 MiB, GB/s: min, median, max of 5.
std::vector<double> measureMemcpy() {
  const size_t n = 64 << 20;
  std::vector<char> a(n, 1), b(n, 2);
  std::vector<double> r;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    memcpy(b.data(), a.data(), n);
    r.push_back(n / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
  }
  return sorted(r);
}

// One page check (the registration cache's, through the real page-frame query), ns per
// page over 64 MiB: min, median, max of 5; empty where frames are hidden.
std::vector<double> measureCheck() {
  const size_t n = 64 << 20, pages = n / 4096;
  void* a = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memset(a, 1, n);
  std::vector<uint64_t> f(pages);
  std::vector<double> r;
  ib::PagemapFile pagemap;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    if (ib::realVerbsOps().page_frames(pagemap.fd(), reinterpret_cast<uintptr_t>(a), pages, f.data()) != 0) break;
    r.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(pages));
  }
  munmap(a, n);
  return sorted(r);
}

// The fixed cost of one registration-cache hit (lookup, one page checked, release), us:
// min, median, max of 5 runs of 2000, with the real page-frame query.
std::vector<double> measureHit() {
  struct Frames : ib::Registrar {
    bool reg(uintptr_t, size_t, bool write, ib::MrKeys* out, int*) override {
      out->writable = write;
      return true;
    }
    void dereg(const ib::MrKeys&) override {}
    bool frames(uintptr_t addr, size_t pages, uint64_t* out) override {
      return ib::realVerbsOps().page_frames(pagemap.fd(), addr, pages, out) == 0;
    }
    ib::PagemapFile pagemap;
  } reg;
  ib::RegCache cache(&reg, ib::CacheMode::kPageCheck, size_t(1) << 30, 4096);
  std::vector<char> buf(4096, 1);
  std::vector<double> r;
  int err = 0;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    for (int k = 0; k < 2000; ++k) cache.release(cache.acquire(buf.data(), buf.size(), true, &err));
    r.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2000);
  }
  return sorted(r);
}

// ---- children: each writes "key v1 v2 ..." lines to fd ----

fake::FakeFabric* installFabric() {
  auto* f = new fake::FakeFabric({fake::ibDevice("mlx5_0"), fake::ibDevice("mlx5_1")});
  ib::setVerbsOpsForTesting(f->ops());
  return f;
}

void drive(const collNetPlugin_v1_t* p, void* s, void* r) {
  int sd = 0, rd = 0;
  while (!sd || !rd) {
    if (!sd && p->test(s, &sd, nullptr, nullptr) != 0) exit(3);
    if (!rd && p->test(r, &rd, nullptr, nullptr) != 0) exit(3);
  }
}

// Single messages over one connection, sizes 4 KiB .. 16 MiB, receive posted with the send.
void sweepChild(FILE* out) {
  fake::FakeFabric* f = installFabric();
  const collNetPlugin_v1_t* p = coll::net::ibBackend();
  void *ctx = nullptr, *listen = nullptr, *send = nullptr, *recv = nullptr;
  char handle[COLL_NET_HANDLE_BYTES], reply[COLL_NET_HANDLE_BYTES];
  if (p->init(nullptr, &ctx) || p->listen(ctx, 1, handle, &listen) || p->connect(ctx, 0, handle, reply, &send) ||
      p->accept(listen, reply, &recv)) {
    fprintf(stderr, "ib_model: %s\n", p->lastError(ctx));
    exit(3);
  }
  constexpr int kReps = 4;
  for (size_t size = 4096; size <= (16u << 20); size *= 2) {
    std::vector<uint8_t> src(size, 7), dst(size);
    auto one = [&] {
      void *s = nullptr, *r = nullptr;
      if (p->irecv(recv, dst.data(), size, &r) || p->isend(send, src.data(), size, 1, &s) || !s || !r) exit(3);
      drive(p, s, r);
    };
    one();  // registers (a cache miss): the steady state is what is counted
    ib::ByteCounts s0 = ib::contextSent(ctx), r0 = ib::contextReceived(ctx);
    auto t0 = f->traffic();
    for (int i = 0; i < kReps; ++i) one();
    ib::ByteCounts s1 = ib::contextSent(ctx), r1 = ib::contextReceived(ctx);
    auto t1 = f->traffic();
    if (dst != src) exit(4);
    const double k = kReps;
    fprintf(out, "sweep %zu %.1f %.1f %.2f %.2f %.1f %zu\n", size,
            double(s1.copiedBytes - s0.copiedBytes + r1.copiedBytes - r0.copiedBytes) / k,
            double(t1.sendBytes - t0.sendBytes + t1.writeBytes - t0.writeBytes) / k,
            double(t1.sends - t0.sends) / k, double(t1.writes - t0.writes) / k,
            double((s1.zcopyBytes - s0.zcopyBytes) + (r1.zcopyBytes - r0.zcopyBytes)) / k / 4096, size);
  }
  p->closeSend(send);
  p->closeRecv(recv);
  p->finalize(ctx);
}

// All-reduce of `bytes` on each rank count, ranks as threads over the net transport.
void ranksChild(FILE* out, const Params& prm) {
  fake::FakeFabric* f = installFabric();
  setenv("COLL_TRANSPORT", "net", 1);
  setenv("COLL_NET", "ib", 1);
  unsetenv("COLL_NET_PLUGIN");
  setenv("COLL_IB_SLOTS", "4", 1);  // 16 ranks keep 480 endpoints: the counts do not depend on it
  setenv("COLL_TIMEOUT", "120", 1);
  const size_t count = prm.bytes / sizeof(float);
  for (int n : prm.ranks) {
    collUniqueId id;
    if (collGetUniqueId(&id) != collSuccess) exit(3);
    std::vector<collComm_t> comms(static_cast<size_t>(n), nullptr);
    std::vector<std::vector<float>> bufs(static_cast<size_t>(n), std::vector<float>(count));
    auto onRanks = [&](auto fn) {
      std::vector<std::thread> ts;
      for (int r = 0; r < n; ++r) ts.emplace_back(fn, r);
      for (auto& t : ts) t.join();
    };
    bool ok = true;
    onRanks([&](int r) { ok &= collCommInitRank(&comms[size_t(r)], n, id, r) == collSuccess; });
    if (!ok) exit(3);
    auto allReduce = [&] {
      onRanks([&](int r) {
        std::fill(bufs[size_t(r)].begin(), bufs[size_t(r)].end(), float(r + 1));
        auto& v = bufs[size_t(r)];
        ok &= collAllReduce(v.data(), v.data(), count, collFloat32, collSum, comms[size_t(r)], nullptr) == collSuccess;
        ok &= v[count / 3] == float(n * (n + 1) / 2);
      });
    };
    allReduce();  // connections made, buffers registered
    std::string why;
    void* ctx = coll::net::backendFor(coll::Config::fromEnv(), &why)->context;
    ib::ByteCounts s0 = ib::contextSent(ctx), r0 = ib::contextReceived(ctx);
    auto t0 = f->traffic();
    allReduce();
    ib::ByteCounts s1 = ib::contextSent(ctx), r1 = ib::contextReceived(ctx);
    auto t1 = f->traffic();
    if (!ok) exit(4);
    const double k = n;
    fprintf(out, "ranks %d %.1f %.1f %.2f %.2f %.1f %.1f\n", n,
            double(s1.copiedBytes - s0.copiedBytes + r1.copiedBytes - r0.copiedBytes) / k,
            double(t1.sendBytes - t0.sendBytes + t1.writeBytes - t0.writeBytes) / k,
            double(s1.eagerMsgs - s0.eagerMsgs + s1.zcopyMsgs - s0.zcopyMsgs) / k,
            double(s1.zcopyMsgs - s0.zcopyMsgs) / k,
            double((s1.zcopyBytes - s0.zcopyBytes) + (r1.zcopyBytes - r0.zcopyBytes)) / k / 4096,
            double(s1.zcopyBytes - s0.zcopyBytes + s1.eagerBytes - s0.eagerBytes) / k);
    onRanks([&](int r) { collCommDestroy(comms[size_t(r)]); });
  }
}

using Rows = std::map<std::string, std::map<long, Cost>>;

// Runs fn in a child with `env` set; parses its lines into rows[tag].
template <typename F>
void inChild(const char* tag, std::vector<std::pair<const char*, const char*>> env, Rows* rows, F fn) {
  int fds[2];
  if (pipe(fds) != 0) exit(2);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    for (auto& [k, v] : env) setenv(k, v, 1);
    FILE* out = fdopen(fds[1], "w");
    fn(out);
    fclose(out);
    _exit(0);
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  char kind[16];
  long key = 0;
  Cost c;
  while (fscanf(in, "%15s %ld %lf %lf %lf %lf %lf %lf", kind, &key, &c.copied, &c.wire, &c.msgs, &c.zmsgs, &c.pages,
                &c.payload) == 8)
    (*rows)[std::string(tag) + ":" + kind][key] = c;
  fclose(in);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "ib_model: the %s run failed (status %d)\n", tag, status);
    exit(1);
  }
}

Params parse(int argc, char** argv) {
  Params p;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--bytes") p.bytes = coll::parseSize(v, "--bytes");
    else if (k == "--wire-gbs") p.wire = atof(v.c_str()) * 1e9;
    else if (k == "--copy-gbs") p.copy = atof(v.c_str()) * 1e9;
    else if (k == "--latency-us") p.alpha = atof(v.c_str()) * 1e-6;
    else if (k == "--check-ns") p.checkNs = atof(v.c_str());
    else if (k == "--hit-us") p.hitUs = atof(v.c_str());
    else if (k == "--ranks") {
      p.ranks.clear();
      for (char* t = strtok(argv[i + 1], ","); t; t = strtok(nullptr, ",")) p.ranks.push_back(atoi(t));
    } else {
      fprintf(stderr, "ib_model: unknown flag %s (see the comment at the top of perf/net/ib_model.cpp)\n", k.c_str());
      exit(2);
    }
  }
  return p;
}

void printSweep(const Params& p, Rows& rows, double tc) {
  const double chunk = 128 << 10;  // COLL_IB_CHUNK's default, as the children ran
  printf("\n# one message on one connection: eager (bounce slots) against zero-copy (RDMA write)\n");
  printf("# %10s %8s %8s %9s %9s %10s %10s %7s\n", "bytes", "copy/B", "copy/B", "sends", "writes", "eager_us",
         "zcopy_us", "ratio");
  printf("# %10s %8s %8s %9s %9s %10s %10s %7s\n", "", "eager", "zcopy", "zcopy", "zcopy", "", "", "e/z");
  long cut = -1;
  for (auto& [size, e] : rows["slots:sweep"]) {
    const Cost& z = rows["zcopy:sweep"][size];
    double te = eagerTime(p, double(size), chunk, e), tz = zcopyTime(p, z, tc);
    if (cut < 0 && tz < te) cut = size;
    printf("  %10ld %8.3f %8.3f %9.2f %9.2f %10.2f %10.2f %7.2f\n", size, e.copied / double(size),
           z.copied / double(size), z.msgs, z.zmsgs, te * 1e6, tz * 1e6, te / tz);
  }
  printf("# cut-over (first size where zero-copy is faster): %ld bytes (COLL_IB_ZCOPY_MIN)\n", cut);
}

void printRanks(const Params& p, Rows& rows, double tc) {
  printf("\n# all-reduce of %zu bytes per rank: predicted busbw on one port of %.0f GB/s\n", p.bytes, p.wire / 1e9);
  printf("# %5s %8s %8s %7s %10s %10s %10s %7s %9s\n", "ranks", "copy/B", "copy/B", "msgs", "eager", "zcopy",
         "zcopy_odp", "ratio", "of_port");
  printf("# %5s %8s %8s %7s %10s %10s %10s %7s %9s\n", "", "eager", "zcopy", "/rank", "GB/s", "GB/s", "GB/s", "z/e",
         "zcopy");
  for (auto& [n, e] : rows["slots:ranks"]) {
    const Cost& z = rows["default:ranks"][n];
    // busbw's factor: what a ring moves per rank, whatever the algorithm moved.
    const double algo = 2.0 * double(n - 1) / double(n) * double(p.bytes);
    const int ni = int(n);
    double be = algo / collectiveTime(p, ni, e, tc) / 1e9, bz = algo / collectiveTime(p, ni, z, tc) / 1e9;
    double bo = algo / collectiveTime(p, ni, z, 0) / 1e9;
    printf("  %5ld %8.3f %8.3f %7.1f %10.2f %10.2f %10.2f %7.2f %8.0f%%\n", n, e.copied / e.payload,
           z.copied / z.payload, z.msgs, be, bz, bo, bz / be, 100 * bz / (p.wire / 1e9));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Params p = parse(argc, argv);
  auto mc = measureMemcpy();
  auto ck = measureCheck();
  auto hit = measureHit();
  // The least disturbed runs: on a shared machine the others are preemption.
  p.hit = p.hitUs >= 0 ? p.hitUs * 1e-6 : std::max(0.0, hit[0] * 1e-6 - (ck.empty() ? 0 : ck[0] * 1e-9));
  const double tc = (p.checkNs >= 0 ? p.checkNs : ck.empty() ? 0 : ck[0]) * 1e-9;
  Rows rows;
  inChild("slots", {{"COLL_IB_ZCOPY", "0"}}, &rows, [](FILE* o) { sweepChild(o); });
  inChild("zcopy", {{"COLL_IB_ZCOPY", "1"}, {"COLL_IB_ZCOPY_MIN", "1"}}, &rows, [](FILE* o) { sweepChild(o); });
  inChild("slots", {{"COLL_IB_ZCOPY", "0"}}, &rows, [&](FILE* o) { ranksChild(o, p); });
  inChild("default", {}, &rows, [&](FILE* o) { ranksChild(o, p); });
  printf("# ib_model: wire %.1f GB/s, copy %.1f GB/s per core, latency %.2f us, page check %.1f ns/page, "
         "cache hit %.2f us\n", p.wire / 1e9, p.copy / 1e9, p.alpha * 1e6, tc * 1e9, p.hit * 1e6);
  printf("# this machine: memcpy 64 MiB %.2f / %.2f / %.2f GB/s (min / median / max of 5)", mc[0], mc[2], mc[4]);
  if (ck.empty()) printf("; page frames hidden (no CAP_SYS_ADMIN)\n");
  else printf("; page check %.1f / %.1f / %.1f ns per page", ck[0], ck[ck.size() / 2], ck.back());
  printf("; cache hit of one page %.2f / %.2f / %.2f us\n", hit[0], hit[2], hit[4]);
  printSweep(p, rows, tc);
  printRanks(p, rows, tc);
  return 0;
}
