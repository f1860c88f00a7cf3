// The engine's autotuning (COLL_AUTOTUNE=1) across processes, under collectiverun with a
// short sample window: many steps of varied tensor sets, every result checked against a
// local reference while the parameters change under them; then every rank must report the
// same final parameters, and rank 0's COLL_AUTOTUNE_LOG must hold the samples, the
// settled parameters being those of its best-scoring one.
//
//   mp_autotune [STEPS]    (environment: COLL_AUTOTUNE=1, COLL_AUTOTUNE_LOG=FILE, ...)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "collective/hvd.hpp"

namespace hvd = collective::hvd;

namespace {

int gRank = -1;
int gFailures = 0;

void fail(const std::string& what) {
  fprintf(stderr, "rank %d: FAILED %s\n", gRank, what.c_str());
  ++gFailures;
}

// Same on every rank: a small linear congruential generator seeded by the step.
struct Lcg {
  uint64_t s;
  uint32_t next(uint32_t n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s >> 33) % n;
  }
};

// Small integers: sums over ranks stay exact in float32.
double valueOf(int rank, int step, int t, int64_t i) { return double((rank + 1) * (t + 1) + (i + step) % 13); }

struct Item {
  std::string name;
  collDataType_t dtype;
  hvd::ReduceOp op;
  std::vector<int64_t> shape;
  std::vector<uint8_t> in, out;
};

template <typename T>
void fill(Item& it, int rank, int step, int t) {
  int64_t n = it.shape[0];
  it.in.resize(n * sizeof(T));
  it.out.assign(n * sizeof(T), 0);
  T* p = reinterpret_cast<T*>(it.in.data());
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(valueOf(rank, step, t, i));
}

template <typename T>
void check(const Item& it, int size, int step, int t) {
  const T* p = reinterpret_cast<const T*>(it.out.data());
  for (int64_t i = 0; i < it.shape[0]; ++i) {
    double want = it.op == hvd::ReduceOp::Max ? valueOf(size - 1, step, t, i) : 0;
    if (it.op != hvd::ReduceOp::Max)
      for (int r = 0; r < size; ++r) want += valueOf(r, step, t, i);
    if (it.op == hvd::ReduceOp::Average) want /= size;
    if (std::fabs(double(p[i]) - want) > 1e-5 * (1 + std::fabs(want))) {
      std::ostringstream os;
      os << it.name << "[" << i << "] = " << double(p[i]) << ", expected " << want;
      fail(os.str());
      return;
    }
  }
}

// One step: 1 to 12 tensors of mixed sizes (some above the smallest fusion thresholds
// tried, 1M), types and ops, submitted in an order that differs between ranks.
void runStep(hvd::Context& ctx, int step) {
  const int rank = ctx.rank(), size = ctx.size();
  Lcg g{static_cast<uint64_t>(step) * 7919 + 17};
  static const int64_t kSizes[] = {1, 7, 1000, 40000, 300000};
  std::vector<Item> items(1 + g.next(12));
  for (size_t t = 0; t < items.size(); ++t) {
    Item& it = items[t];
    it.name = "s" + std::to_string(step % 8) + ".t" + std::to_string(t);  // names recur: cache hits
    it.shape = {kSizes[g.next(5)]};
    uint32_t kind = g.next(3);
    it.dtype = kind == 0 ? collFloat32 : kind == 1 ? collFloat64 : collInt32;
    it.op = kind == 2 ? hvd::ReduceOp::Max : (g.next(2) ? hvd::ReduceOp::Sum : hvd::ReduceOp::Average);
    if (it.dtype == collFloat32) fill<float>(it, rank, step, int(t));
    else if (it.dtype == collFloat64) fill<double>(it, rank, step, int(t));
    else fill<int32_t>(it, rank, step, int(t));
  }
  std::vector<hvd::Handle> hs(items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    size_t t = (rank % 2) ? items.size() - 1 - k : k;
    Item& it = items[t];
    hvd::Tensor in{it.in.data(), it.dtype, it.shape}, out{it.out.data(), it.dtype, it.shape};
    hs[t] = ctx.allreduce_async(in, out, it.name, {.op = it.op});
  }
  for (size_t t = 0; t < items.size(); ++t) {
    hs[t].wait();
    const Item& it = items[t];
    if (it.dtype == collFloat32) check<float>(it, size, step, int(t));
    else if (it.dtype == collFloat64) check<double>(it, size, step, int(t));
    else check<int32_t>(it, size, step, int(t));
  }
}

std::vector<std::string> splitCsv(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
  return f;
}

// Rank 0: the log's header, at least a few scored samples, and the settled parameters
// are the best-scoring sample's.
void checkLog(const char* path, const hvd::Stats& st) {
  std::ifstream f(path);
  if (!f) return fail(std::string("no autotune log at ") + path);
  std::string line;
  std::getline(f, line);
  const std::string header =
      "sample,phase,fusion_threshold_bytes,cycle_time_ms,fusion_chunk_bytes,bytes,seconds,score_bytes_per_s";
  if (line != header) return fail("log header is '" + line + "'");
  int tuned = 0, warmup = 0;
  double bestScore = -1;
  std::vector<std::string> best;
  const char* fixedChunk = getenv("COLL_FUSION_CHUNK");
  while (std::getline(f, line)) {
    auto v = splitCsv(line);
    if (v.size() != 8) return fail("log line '" + line + "' does not have 8 fields");
    if (v[1] == "warmup") ++warmup;
    if (v[1] != "tune") continue;
    ++tuned;
    if (fixedChunk && std::stoull(v[4]) != std::stoull(fixedChunk))  // given in bytes
      fail("log line '" + line + "': the fusion chunk the user set was not held");
    double score = std::stod(v[7]);
    if (score > bestScore) bestScore = score, best = v;
  }
  printf("autotune log: %d warm-up and %d scored samples\n", warmup, tuned);
  if (warmup < 1) fail("no warm-up sample in the log");
  if (tuned < 5) fail("only " + std::to_string(tuned) + " scored samples in the log");
  if (best.empty()) return;
  if (std::stoull(best[2]) != st.fusion_threshold || std::stoull(best[4]) != st.fusion_chunk ||
      std::llround(std::stod(best[3]) * 1000) != static_cast<long long>(st.cycle_time_us))
    fail("settled parameters are not the best sample's (sample " + best[0] + ")");
}

}  // namespace

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::max(1, atoi(argv[1])) : 150;
  try {
    auto ctx = hvd::Context::from_env();
    gRank = ctx->rank();
    for (int s = 0; s < steps; ++s) runStep(*ctx, s);
    hvd::Stats st = ctx->stats();
    printf("rank %d: autotune %s: fusion threshold %llu, cycle time %llu us, fusion chunk %llu\n", gRank,
           st.autotune_done ? "settled" : "NOT settled", (unsigned long long)st.fusion_threshold,
           (unsigned long long)st.cycle_time_us, (unsigned long long)st.fusion_chunk);
    if (!st.autotune_done) fail("autotune did not settle within " + std::to_string(steps) + " steps");
    // Every rank's final parameters, side by side.
    std::vector<int64_t> mine = {int64_t(st.fusion_threshold), int64_t(st.cycle_time_us),
                                 int64_t(st.fusion_chunk), st.autotune_done ? 1 : 0};
    hvd::Handle h = ctx->allgather_async({mine.data(), collInt64, {1, 4}}, "autotune.final");
    h.wait();
    const auto* all = static_cast<const int64_t*>(h.output().tensor.data);
    for (int r = 0; r < ctx->size(); ++r)
      for (int k = 0; k < 4; ++k)
        if (all[r * 4 + k] != mine[k])
          fail("rank " + std::to_string(r) + " reports other final parameters (field " + std::to_string(k) + ")");
    ctx->shutdown();
    if (gRank == 0) {
      const char* path = getenv("COLL_AUTOTUNE_LOG");
      if (!path) fail("COLL_AUTOTUNE_LOG is not set");
      else checkLog(path, st);
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "rank %d: %s\n", gRank, e.what());
    return 1;
  }
  if (gFailures) return 1;
  printf("rank %d: OK\n", gRank);
  return 0;
}
