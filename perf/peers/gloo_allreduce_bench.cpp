// The Gloo peer of all_reduce_perf: Gloo's ring all-reduce (float sum) over its TCP
// transport on loopback, the same size sweep, timing rule and table. It starts its own
// ranks (fork) and rendezvouses them through a FileStore in a fresh temporary folder,
// so it needs no launcher:
//   gloo_allreduce_bench -np 2 -b 8 -e 64M -f 4
// Or one rank per invocation, for ranks on different (namespace) hosts that share a
// file system: each names its rank, the store folder and the address it listens on:
//   gloo_allreduce_bench -np 2 --rank R --store DIR --hostname 10.0.0.R -b 8 -e 64M
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "check.hpp"
#include "common.hpp"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"
#include "peer_report.hpp"

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);
constexpr auto kGlooTimeout = std::chrono::seconds(120);

// Max over ranks of one value (times and wrong counts), through Gloo itself.
double maxOverRanks(const std::shared_ptr<gloo::Context>& ctx, double v, uint32_t tag) {
  gloo::AllreduceOptions o(ctx);
  o.setInput(&v, 1);
  o.setOutput(&v, 1);
  o.setReduceFunction(static_cast<ReduceFn>(&gloo::max<double>));
  o.setTag(tag);
  gloo::allreduce(o);
  return v;
}

long long runSize(const std::shared_ptr<gloo::Context>& ctx, const perf::Options& opts,
                  size_t bytes, float* send, float* recv) {
  int rank = ctx->rank, n = ctx->size;
  perf::Counts k = perf::countsFor(perf::Coll::AllReduce, bytes, sizeof(float), n, rank);
  if (k.paramCount == 0) return 0;  // Gloo refuses empty buffers
  perf::Pattern p(collFloat, collSum, n);
  perf::IterCount ic = perf::itersForSize(opts, bytes);
  gloo::AllreduceOptions o(ctx);
  o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  o.setInput(send, k.paramCount);
  o.setOutput(recv, k.paramCount);
  o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
  o.setTag(1);
  perf::fillInput(send, k.sendCount, p, rank);
  for (int i = 0; i < ic.warmup; ++i) gloo::allreduce(o);
  maxOverRanks(ctx, 0, 2);  // a barrier
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < ic.iters; ++i) gloo::allreduce(o);
  std::chrono::duration<double, std::micro> el = std::chrono::steady_clock::now() - start;
  double us = maxOverRanks(ctx, el.count() / ic.iters, 3);
  long long wrong = -1;
  if (opts.check) {
    std::memset(recv, 0xFF, k.recvCount * sizeof(float));
    gloo::allreduce(o);
    double w = static_cast<double>(
        perf::countWrong(perf::Coll::AllReduce, p, k, n, rank, 0, recv));
    wrong = static_cast<long long>(maxOverRanks(ctx, w, 4));
  }
  if (rank == 0) {
    perf::printPeerRow(k.printedCount() * sizeof(float), k.printedCount(), "float", "sum", -1,
                       us, perf::busBwFactor(perf::Coll::AllReduce, n), wrong);
  }
  return wrong;
}

int runRank(int rank, int n, const std::string& storeDir, const std::string& hostname,
            const perf::Options& opts) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(storeDir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
    ctx->setTimeout(kGlooTimeout);
    ctx->connectFullMesh(store, dev);
    size_t floats = opts.maxBytes / sizeof(float) + 1;
    std::vector<float> send(floats), recv(floats);
    if (rank == 0) {
      std::printf("# gloo_allreduce_bench: gloo::allreduce ring, float sum, tcp on %s,"
                  " nranks %d\n", hostname.c_str(), n);
      perf::printPeerTableHeader();
    }
    long long wrongTotal = 0;
    for (size_t bytes : perf::sizeList(opts))
      wrongTotal += std::max(0LL, runSize(ctx, opts, bytes, send.data(), recv.data()));
    if (rank == 0)
      std::printf("# Out of bounds values : %lld %s\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
    std::fflush(stdout);
    return wrongTotal ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce_bench: rank %d: %s\n", rank, e.what());
    return 1;
  }
}

// Takes "NAME VALUE" out of args; `fallback` when absent.
std::string takeOption(std::vector<std::string>& args, const char* name, const std::string& fallback) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] != name) continue;
    std::string v = args[i + 1];
    args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
    return v;
  }
  return fallback;
}

int parseCount(const std::string& text, const char* name, int lo, int hi) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || v < lo || v > hi)
    throw perf::UsageError("invalid value '" + text + "' for " + name);
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  perf::Options opts;
  int n = 2, rank = -1;
  std::string store, hostname;
  try {
    n = parseCount(takeOption(args, "-np", "2"), "-np", 1, 256);
    std::string r = takeOption(args, "--rank", "");
    store = takeOption(args, "--store", "");
    hostname = takeOption(args, "--hostname", "127.0.0.1");
    if (!r.empty()) rank = parseCount(r, "--rank", 0, n - 1);
    if ((rank >= 0) != !store.empty()) throw perf::UsageError("--rank and --store go together");
    opts = perf::parseArgs(args);
  } catch (const perf::UsageError& e) {
    std::fprintf(stderr, "gloo_allreduce_bench: %s\n", e.what());
    return 2;
  }
  if (rank >= 0) return runRank(rank, n, store, hostname, opts);
  char tmpl[] = "/tmp/gloo_bench.XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("gloo_allreduce_bench: mkdtemp");
    return 1;
  }
  std::string storeDir = tmpl;
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(runRank(r, n, storeDir, hostname, opts));
    if (pid < 0) std::perror("gloo_allreduce_bench: fork");
    else children.push_back(pid);
  }
  int status = children.size() == static_cast<size_t>(n) ? 0 : 1;
  for (pid_t pid : children) {
    int st = 0;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) status = 1;
  }
  std::error_code ec;
  std::filesystem::remove_all(storeDir, ec);
  return status;
}
