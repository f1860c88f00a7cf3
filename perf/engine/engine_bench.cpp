// Engine benchmarks over the public API (collective.h + collective/hvd.hpp). Every rank
// runs the same program; launch with collectiverun or by hand with the COLL_* contract.
//
//   engine_bench resnet [--tsv FILE] [--iters N] [--warmup N] [--compression LIST] [--no-raw]
//       The ResNet-50 gradient set (161 float32 tensors, 102 MB), submitted async in
//       backward order. Compares one raw collAllReduce of a single buffer of the same size
//       with the whole set through the engine, then each compressor in LIST (none, fp16,
//       bf16, int8, topk) against the uncompressed engine run.
//   engine_bench small [--count N] [--bytes B] [--iters N]
//       N tensors of B bytes: N blocking collAllReduce calls vs the engine.
//   engine_bench latency [--bytes B] [--iters N]
//       One blocking call at a time, as a training script's hvd.allreduce(small): the
//       median and 90th percentile of N engine all-reduces of B bytes, then of N plain
//       collAllReduce calls (what the engine's own round costs on top). Run it next to a
//       busy process to see the cost of waking threads on a loaded machine.
//   engine_bench raw [--bytes B] [--iters N]
//       The collectives the engine builds on, alone: all-reduce of B bytes, all-to-all and
//       all-gather moving the same bytes per rank (to read the other results against).
//
// Rank 0 prints medians and ratios; every line starting with "RESULT" is machine-readable.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "collective.h"
#include "collective/hvd.hpp"

namespace hvd = collective::hvd;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string mode;
  std::string tsv = "/work/shared/data/resnet50_gradients.tsv";
  int iters = 5;
  int warmup = 2;
  std::vector<std::string> compression;
  bool raw = true;
  int count = 1000;
  size_t bytes = 4096;
  double density = 0.01;
};

[[noreturn]] void usage(const char* msg) {
  fprintf(stderr, "engine_bench: %s\nusage: engine_bench resnet|small [options] (see the source header)\n", msg);
  exit(2);
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) usage("missing mode");
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string o = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + o).c_str());
      return argv[++i];
    };
    if (o == "--tsv") a.tsv = val();
    else if (o == "--iters") a.iters = std::max(1, atoi(val().c_str()));
    else if (o == "--warmup") a.warmup = std::max(0, atoi(val().c_str()));
    else if (o == "--compression") a.compression = splitList(val());
    else if (o == "--no-raw") a.raw = false;
    else if (o == "--count") a.count = std::max(1, atoi(val().c_str()));
    else if (o == "--bytes") a.bytes = static_cast<size_t>(std::max(4ll, atoll(val().c_str())));
    else if (o == "--density") a.density = atof(val().c_str());
    else usage(("unknown option " + o).c_str());
  }
  if (a.mode != "resnet" && a.mode != "small" && a.mode != "raw" && a.mode != "latency")
    usage("mode must be resnet, small, latency or raw");
  return a;
}

struct Grad {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Rank-dependent, cheap to regenerate and exactly averageable: multiples of 2^-20.
float gradValue(int rank, size_t tensor, size_t i) {
  uint32_t h = static_cast<uint32_t>(i * 2654435761u + tensor * 97u + static_cast<uint32_t>(rank) * 131u);
  return static_cast<float>(static_cast<int32_t>(h % 2001u) - 1000) * (1.0f / 1048576.0f);
}

void fillGradients(std::vector<Grad>& grads, int rank) {
  for (size_t t = 0; t < grads.size(); ++t)
    for (size_t i = 0; i < grads[t].data.size(); ++i) grads[t].data[i] = gradValue(rank, t, i);
}

std::vector<Grad> loadGradients(const std::string& path, int rank) {
  std::ifstream f(path);
  if (!f) usage(("cannot open " + path).c_str());
  std::vector<Grad> out;
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream ls(line);
    std::string name, shape, elems;
    std::getline(ls, name, '\t');
    std::getline(ls, shape, '\t');
    std::getline(ls, elems, '\t');
    Grad g;
    g.name = name;
    std::stringstream ss(shape);
    for (std::string d; std::getline(ss, d, 'x');) g.shape.push_back(atoll(d.c_str()));
    g.data.resize(static_cast<size_t>(atoll(elems.c_str())));
    out.push_back(std::move(g));
  }
  fillGradients(out, rank);
  return out;
}

// After an uncompressed Average step every element is the mean of the ranks' values
// (exact: the sums of 2^-20 multiples are exact in float). Checks a strided sample.
bool checkAverage(const std::vector<Grad>& grads, int size) {
  for (size_t t = 0; t < grads.size(); ++t)
    for (size_t i = 0; i < grads[t].data.size(); i += 997) {
      float sum = 0;
      for (int r = 0; r < size; ++r) sum += gradValue(r, t, i);
      if (grads[t].data[i] != sum / static_cast<float>(size)) {
        fprintf(stderr, "engine_bench: wrong result in %s[%zu]: %g, expected %g\n", grads[t].name.c_str(), i,
                grads[t].data[i], sum / static_cast<float>(size));
        return false;
      }
    }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void check(collResult_t r, const char* what) {
  if (r != collSuccess) {
    fprintf(stderr, "engine_bench: %s failed: %s\n", what, collGetLastError(nullptr));
    exit(1);
  }
}

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// CPU seconds this process used so far (all threads): on a shared machine the wall
// times above depend on the load, the CPU cost does not.
double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// One raw all-reduce of `bytes` bytes (what the engine is measured against), with the
// op the engine runs (Average), so the ratio is the engine's overhead alone.
double rawAllreduce(collComm_t comm, size_t bytes, int warmup, int iters) {
  std::vector<float> buf(bytes / 4, 1.0f);
  std::vector<double> t;
  for (int i = 0; i < warmup + iters; ++i) {
    check(collBarrier(comm), "collBarrier");
    auto t0 = Clock::now();
    check(collAllReduce(buf.data(), buf.data(), buf.size(), collFloat32, collAvg, comm, nullptr), "collAllReduce");
    if (i >= warmup) t.push_back(seconds(t0, Clock::now()));
  }
  return median(t);
}

hvd::Compression compressionOf(const std::string& s, double density) {
  if (s == "none") return hvd::Compression::none();
  if (s == "fp16") return hvd::Compression::fp16();
  if (s == "bf16") return hvd::Compression::bf16();
  if (s == "int8") return hvd::Compression::int8();
  if (s == "topk") return hvd::Compression::topk(density);
  usage(("unknown compression " + s).c_str());
}

// The whole gradient set through the engine, async in backward order; median seconds.
double engineStep(hvd::Context& ctx, std::vector<Grad>& grads, const hvd::Compression& c, int warmup,
                  int iters, double* cpuPerStep = nullptr) {
  std::vector<double> t;
  double cpu0 = 0, cpuUntimed = 0;
  hvd::AllreduceOptions o{.op = hvd::ReduceOp::Average, .compression = c};
  for (int i = 0; i < warmup + iters; ++i) {
    double c0 = cpuSeconds();
    fillGradients(grads, ctx.rank());  // every step reduces fresh, rank-dependent data
    if (i >= warmup) cpuUntimed += cpuSeconds() - c0;
    ctx.barrier();
    if (i == warmup) cpu0 = cpuSeconds() - cpuUntimed;
    auto t0 = Clock::now();
    std::vector<hvd::Handle> hs;
    hs.reserve(grads.size());
    for (auto& g : grads) {
      hvd::Tensor tensor{g.data.data(), collFloat32, g.shape};
      hs.push_back(ctx.allreduce_async(tensor, tensor, g.name, o));
    }
    for (auto& h : hs) hvd::synchronize(h);
    if (i >= warmup) t.push_back(seconds(t0, Clock::now()));
  }
  if (cpuPerStep) *cpuPerStep = (cpuSeconds() - cpu0 - cpuUntimed) / iters;
  if (c.kind == hvd::Compressor::None && !checkAverage(grads, ctx.size())) exit(1);
  return median(t);
}

// Raw and engine runs alternate so that drifting machine load hits both alike; the raw
// all-reduce runs while no engine exists, so nothing competes with it.
void runResnet(collComm_t comm, const Args& a, int rank, int size) {
  auto grads = loadGradients(a.tsv, rank);
  size_t bytes = 0;
  for (auto& g : grads) bytes += g.data.size() * 4;
  if (rank == 0)
    printf("resnet50: %zu tensors, %zu bytes, %d ranks, COLL_TRANSPORT=%s\n", grads.size(), bytes, size,
           getenv("COLL_TRANSPORT") ? getenv("COLL_TRANSPORT") : "auto");
  std::vector<double> raw, eng, ratio;
  uint64_t direct = 0;
  for (int i = 0; i < (a.raw ? a.iters : 1); ++i) {
    double r = a.raw ? rawAllreduce(comm, bytes, i == 0 ? a.warmup : 0, 1) : 0;
    auto ctx = hvd::Context::from_comm(comm);
    // Each fresh engine negotiates and allocates in its first step: at least one warm-up.
    double e = engineStep(*ctx, grads, hvd::Compression::none(), std::max(1, a.warmup), a.raw ? 1 : a.iters);
    direct = ctx->stats().direct_bytes;
    ctx->shutdown();
    raw.push_back(r);
    eng.push_back(e);
    if (a.raw) ratio.push_back(e / r);
  }
  double base = median(eng);
  if (rank == 0) {
    printf("engine, %zu tensors uncompressed: %.2f ms (median); tensors >= %llu bytes ran unfused\n", grads.size(),
           base * 1e3, static_cast<unsigned long long>(direct));
    if (a.raw) {
      printf("raw collAllReduce of one %zu-byte buffer: %.2f ms (median)\n", bytes, median(raw) * 1e3);
      printf("RESULT resnet_engine_over_raw %.3f (target <= 1.15; median of %d paired runs)\n", median(ratio),
             a.iters);
    }
    printf("RESULT resnet_engine_ms %.3f\n", base * 1e3);
  }
  if (a.compression.empty()) return;
  auto ctx = hvd::Context::from_comm(comm);
  double baseCpu = 0, cpu = 0;
  base = engineStep(*ctx, grads, hvd::Compression::none(), a.warmup, a.iters, &baseCpu);
  for (const auto& name : a.compression) {
    if (name == "none") continue;
    double t = engineStep(*ctx, grads, compressionOf(name, a.density), a.warmup, a.iters, &cpu);
    if (rank == 0)
      printf("RESULT compression_%s_speedup %.2f (%.2f ms vs %.2f ms uncompressed; CPU per step %.0f ms vs %.0f ms)\n",
             name.c_str(), base / t, t * 1e3, base * 1e3, cpu * 1e3, baseCpu * 1e3);
  }
  auto st = ctx->stats();
  if (rank == 0)
    printf("engine stats: cycles %llu, cache hits %llu, negotiated %llu, collectives %llu\n",
           (unsigned long long)st.cycles, (unsigned long long)st.cache_hits, (unsigned long long)st.negotiated,
           (unsigned long long)st.collectives);
  ctx->shutdown();
}

void runSmall(collComm_t comm, const Args& a, int rank, int size) {
  size_t n = a.bytes / 4;
  std::vector<std::vector<float>> ts(a.count, std::vector<float>(n, 1.0f));
  std::vector<double> raw;
  for (int i = 0; i < a.warmup + a.iters; ++i) {
    check(collBarrier(comm), "collBarrier");
    auto t0 = Clock::now();
    for (auto& t : ts) check(collAllReduce(t.data(), t.data(), n, collFloat32, collSum, comm, nullptr), "collAllReduce");
    if (i >= a.warmup) raw.push_back(seconds(t0, Clock::now()));
  }
  auto ctx = hvd::Context::from_comm(comm);
  std::vector<double> eng;
  std::vector<std::string> names;
  for (int k = 0; k < a.count; ++k) names.push_back("t" + std::to_string(k));
  for (int i = 0; i < a.warmup + a.iters; ++i) {
    ctx->barrier();
    auto t0 = Clock::now();
    std::vector<hvd::Handle> hs;
    for (int k = 0; k < a.count; ++k) {
      hvd::Tensor t{ts[k].data(), collFloat32, {static_cast<int64_t>(n)}};
      hs.push_back(ctx->allreduce_async(t, t, names[k], {.op = hvd::ReduceOp::Sum}));
    }
    for (auto& h : hs) hvd::synchronize(h);
    if (i >= a.warmup) eng.push_back(seconds(t0, Clock::now()));
  }
  if (rank == 0) {
    printf("%d tensors of %zu bytes, %d ranks: %d blocking collAllReduce %.2f ms, engine %.2f ms\n", a.count,
           a.bytes, size, a.count, median(raw) * 1e3, median(eng) * 1e3);
    printf("RESULT small_engine_speedup %.1f (target >= 20)\n", median(raw) / median(eng));
  }
  ctx->shutdown();
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

void runLatency(collComm_t comm, const Args& a, int rank, int size) {
  size_t n = a.bytes / 4;
  std::vector<float> buf(n);
  std::vector<double> eng, raw;
  size_t wrong = 0;
  const int total = a.warmup + a.iters;
  // The plain calls first: the engine's thread owns the communicator from from_comm on.
  for (int i = 0; i < total; ++i) {
    auto t0 = Clock::now();
    check(collAllReduce(buf.data(), buf.data(), n, collFloat32, collSum, comm, nullptr), "collAllReduce");
    if (i >= a.warmup) raw.push_back(seconds(t0, Clock::now()));
  }
  auto ctx = hvd::Context::from_comm(comm);
  for (int i = 0; i < total; ++i) {
    std::fill(buf.begin(), buf.end(), static_cast<float>(rank + i));
    hvd::Tensor t{buf.data(), collFloat32, {static_cast<int64_t>(n)}};
    auto t0 = Clock::now();
    hvd::synchronize(ctx->allreduce_async(t, t, "latency", {.op = hvd::ReduceOp::Sum}));
    if (i >= a.warmup) eng.push_back(seconds(t0, Clock::now()));
    const float want = static_cast<float>(size) * i + static_cast<float>(size) * (size - 1) / 2;
    wrong += std::count_if(buf.begin(), buf.end(), [&](float x) { return x != want; });
  }
  if (rank == 0) {
    printf("%zu bytes, %d ranks, one blocking call at a time, %d calls: engine median %.1f us (p90 %.1f), "
           "collAllReduce median %.1f us (p90 %.1f)\n",
           a.bytes, size, a.iters, median(eng) * 1e6, percentile(eng, 0.9) * 1e6, median(raw) * 1e6,
           percentile(raw, 0.9) * 1e6);
    printf("# wrong values: %zu %s\n", wrong, wrong ? "FAIL" : "OK");
    printf("RESULT latency_engine_us %.1f\nRESULT latency_raw_us %.1f\n", median(eng) * 1e6, median(raw) * 1e6);
  }
  ctx->shutdown();
  if (wrong) exit(1);
}

void runRaw(collComm_t comm, const Args& a, int rank, int size) {
  size_t n = a.bytes / 4;
  std::vector<float> send(n, 1.0f), recv(n * size);
  auto time = [&](const char* what, const std::function<collResult_t()>& op) {
    std::vector<double> t;
    for (int i = 0; i < a.warmup + a.iters; ++i) {
      check(collBarrier(comm), "collBarrier");
      auto t0 = Clock::now();
      check(op(), what);
      if (i >= a.warmup) t.push_back(seconds(t0, Clock::now()));
    }
    if (rank == 0) printf("%-28s %10.2f ms\n", what, median(t) * 1e3);
  };
  time("collAllReduce B", [&] { return collAllReduce(send.data(), send.data(), n, collFloat32, collSum, comm, nullptr); });
  time("collAllToAll B/size each", [&] { return collAllToAll(send.data(), recv.data(), n / size, collFloat32, comm, nullptr); });
  time("collAllGather B/size each", [&] { return collAllGather(send.data(), recv.data(), n / size, collFloat32, comm, nullptr); });
  time("memcpy B", [&] { std::memcpy(recv.data(), send.data(), n * 4); return collSuccess; });
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  collComm_t comm = nullptr;
  check(collCommInitFromEnv(&comm), "collCommInitFromEnv");
  int rank = 0, size = 1;
  check(collCommUserRank(comm, &rank), "collCommUserRank");
  check(collCommCount(comm, &size), "collCommCount");
  try {
    if (a.mode == "resnet") runResnet(comm, a, rank, size);
    else if (a.mode == "raw") runRaw(comm, a, rank, size);
    else if (a.mode == "latency") runLatency(comm, a, rank, size);
    else runSmall(comm, a, rank, size);
  } catch (const hvd::Error& e) {
    fprintf(stderr, "engine_bench rank %d: %s\n", rank, e.what());
    return 1;
  }
  fflush(stdout);
  collCommDestroy(comm);
  return 0;
}
