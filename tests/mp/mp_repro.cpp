// Reproducible reductions between processes: all-reduce, reduce and reduce-scatter with
// collSumReproducible / collAvgReproducible (and collSum / collAvg when the job runs with
// COLL_REPRODUCIBLE=1), for the four floating types, at counts that take the all-gather
// path and the all-to-all path. Every rank derives the same set of input vectors from a
// seed and takes one of them by a random assignment; the result must have exactly the
// bits of the reproducible sum of the set (comm/repro.hpp, checked against exact sums by
// the unit test repro), whatever the job's algorithms, transports, chunk size, host
// layout or rank count. A second set holds two vectors and zeros elsewhere: its sum must
// be the sum of the two on every rank count. Also: special values, integers (which take
// the ordinary exact sum), a nonblocking call and in-place calls.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "collective.h"
#include "base/reduce.hpp"
#include "comm/repro.hpp"

namespace {

struct Job {
  collComm_t comm = nullptr;
  int rank = 0, n = 1;
  long checks = 0;
  int failures = 0;
};

void fail(Job& job, const std::string& what) {
  if (job.failures++ < 10) fprintf(stderr, "rank %d: FAIL %s\n", job.rank, what.c_str());
}

void call(Job& job, collResult_t rc, const char* what) {
  if (rc != collSuccess) {
    fprintf(stderr, "rank %d: %s failed: %s\n", job.rank, what, collGetLastError(job.comm));
    exit(1);
  }
}

const char* typeName(collDataType_t dt) {
  return dt == collFloat16 ? "float16" : dt == collBfloat16 ? "bfloat16" : dt == collFloat32 ? "float32" : "float64";
}

// Vector v of a set: values m * 2^e with e in [-12, 12], some exact zeros.
std::vector<uint8_t> makeVector(uint64_t seed, int v, size_t count, collDataType_t dt) {
  const size_t es = collTypeSize(dt);
  std::vector<uint8_t> buf(count * es);
  std::mt19937_64 rng(seed * 1000003 + v);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> e(-12, 12);
  for (size_t i = 0; i < count; ++i) {
    const double x = rng() % 16 == 0 ? 0.0 : std::ldexp(u(rng), e(rng));
    switch (dt) {
      case collFloat16: { uint16_t h = coll::floatToHalf(static_cast<float>(x)); memcpy(&buf[i * 2], &h, 2); break; }
      case collBfloat16: { uint16_t h = coll::floatToBf16(static_cast<float>(x)); memcpy(&buf[i * 2], &h, 2); break; }
      case collFloat32: { float f = static_cast<float>(x); memcpy(&buf[i * 4], &f, 4); break; }
      default: memcpy(&buf[i * 8], &x, 8); break;
    }
  }
  return buf;
}

enum class Kind { AllReduce, Reduce, ReduceScatter };
const char* kindName(Kind k) {
  return k == Kind::AllReduce ? "allreduce" : k == Kind::Reduce ? "reduce" : "reducescatter";
}

// One case: `set` holds job.n vectors of `total` elements (the whole input of a rank);
// rank r reduces set[perm[r]].
void runCase(Job& job, Kind kind, collDataType_t dt, collRedOp_t op, size_t total,
             const std::vector<std::vector<uint8_t>>& set, const std::vector<int>& perm,
             const std::vector<uint8_t>& expected, bool inPlace, const std::string& label) {
  const size_t es = collTypeSize(dt);
  const int n = job.n, me = job.rank;
  const size_t outCount = kind == Kind::ReduceScatter ? total / n : total;
  std::vector<uint8_t> send = set[perm[me]];
  std::vector<uint8_t> recv(outCount * es, 0xA5);
  const int root = n - 1;
  void* out = recv.data();
  switch (kind) {
    case Kind::AllReduce:
      if (inPlace) {
        call(job, collAllReduce(send.data(), send.data(), total, dt, op, job.comm, nullptr), "allreduce");
        memcpy(recv.data(), send.data(), recv.size());
      } else {
        call(job, collAllReduce(send.data(), out, total, dt, op, job.comm, nullptr), "allreduce");
      }
      break;
    case Kind::Reduce:
      call(job, collReduce(send.data(), out, total, dt, op, root, job.comm, nullptr), "reduce");
      if (me != root) return;
      break;
    case Kind::ReduceScatter:
      if (inPlace) {
        call(job, collReduceScatter(send.data(), send.data() + me * outCount * es, outCount, dt, op, job.comm, nullptr),
             "reducescatter");
        memcpy(recv.data(), send.data() + me * outCount * es, recv.size());
      } else {
        call(job, collReduceScatter(send.data(), out, outCount, dt, op, job.comm, nullptr), "reducescatter");
      }
      break;
  }
  const uint8_t* want = expected.data() + (kind == Kind::ReduceScatter ? me * outCount * es : 0);
  ++job.checks;
  if (memcmp(recv.data(), want, recv.size()) != 0) {
    size_t i = 0;
    while (memcmp(recv.data() + i * es, want + i * es, es) == 0) ++i;
    fail(job, std::string(kindName(kind)) + " " + typeName(dt) + " op " + std::to_string(op) + " count " +
                  std::to_string(total) + (inPlace ? " in place" : "") + " " + label + ": element " +
                  std::to_string(i) + " differs from the reproducible sum of the set");
  }
}

std::vector<uint8_t> reference(const std::vector<std::vector<uint8_t>>& set, size_t total, collDataType_t dt,
                               int divisor) {
  const size_t es = collTypeSize(dt);
  std::vector<uint8_t> packed;
  for (const auto& v : set) packed.insert(packed.end(), v.begin(), v.end());
  std::vector<uint8_t> out(total * es);
  coll::reproSumSlices(out.data(), packed.data(), total, static_cast<int>(set.size()), total, dt, divisor);
  return out;
}

void randomCases(Job& job, const std::vector<size_t>& counts, bool modeOn) {
  std::vector<collRedOp_t> ops = {collSumReproducible, collAvgReproducible};
  if (modeOn) ops = {collSum, collAvg, collSumReproducible};
  uint64_t seed = 1;
  for (collDataType_t dt : {collFloat32, collFloat64, collFloat16, collBfloat16}) {
    for (size_t count : counts) {
      const size_t total = (count + job.n - 1) / job.n * job.n;  // divisible, for reduce-scatter
      ++seed;
      std::vector<std::vector<uint8_t>> set, pair;
      for (int v = 0; v < job.n; ++v) set.push_back(makeVector(seed, v, total, dt));
      // The two-vector set, padded with zeros to the job's size.
      for (int v = 0; v < job.n; ++v)
        pair.push_back(v < 2 ? makeVector(seed + 77, v, total, dt) : std::vector<uint8_t>(total * collTypeSize(dt), 0));
      const auto sum = reference(set, total, dt, 1);
      const auto avg = reference(set, total, dt, job.n);
      // The two vectors alone: the same for every rank count.
      const auto pairSum = reference({pair.begin(), pair.begin() + std::min(job.n, 2)}, total, dt, 1);
      std::mt19937 rng(static_cast<uint32_t>(seed));
      for (int trial = 0; trial < 2; ++trial) {
        std::vector<int> perm(job.n);
        for (int r = 0; r < job.n; ++r) perm[r] = r;
        std::shuffle(perm.begin(), perm.end(), rng);  // same on every rank: same seed
        for (Kind kind : {Kind::AllReduce, Kind::Reduce, Kind::ReduceScatter})
          for (collRedOp_t op : ops) {
            const bool isAvg = op == collAvg || op == collAvgReproducible;
            runCase(job, kind, dt, op, total, set, perm, isAvg ? avg : sum, trial == 1, "random set");
          }
        runCase(job, Kind::AllReduce, dt, ops[0], total, pair, perm, pairSum, false, "two vectors and zeros");
      }
    }
  }
}

void specialCases(Job& job) {
  const float inf = INFINITY, nan = NAN, big = 3e38f;
  // Element k: rank 0 holds a special, the others ordinary values; and pairs across ranks.
  const int n = job.n;
  std::vector<float> in = {1.0f, 2.0f, big, -big, 0x1p-149f, 0.0f};
  if (job.rank == 0) in = {inf, nan, big, -big, 0x1p-149f, -0.0f};
  if (job.rank == 1) in[0] = -inf;
  std::vector<float> out(in.size());
  call(job, collAllReduce(in.data(), out.data(), in.size(), collFloat32, collSumReproducible, job.comm, nullptr),
       "allreduce of special values");
  ++job.checks;
  const bool ok0 = n >= 2 ? std::isnan(out[0]) : out[0] == inf;
  const bool ok2 = n >= 2 ? out[2] == inf : out[2] == big;  // 2 * 3e38 overflows: +Inf
  const bool ok3 = n >= 2 ? out[3] == -inf : out[3] == -big;
  if (!ok0 || !std::isnan(out[1]) || !ok2 || !ok3 || out[4] != n * 0x1p-149f || out[5] != 0.0f)
    fail(job, "special values: got " + std::to_string(out[0]) + " " + std::to_string(out[1]) + " " +
                  std::to_string(out[2]) + " " + std::to_string(out[3]) + " " + std::to_string(out[4]));
}

void otherCases(Job& job) {
  // Integers take the ordinary (exact) sum.
  std::vector<int32_t> in(100), out(100);
  for (int i = 0; i < 100; ++i) in[i] = i * (job.rank + 1) - 7;
  call(job, collAllReduce(in.data(), out.data(), 100, collInt32, collSumReproducible, job.comm, nullptr), "int32");
  const int tri = job.n * (job.n + 1) / 2;
  for (int i = 0; i < 100; ++i)
    if (out[i] != i * tri - 7 * job.n) {
      fail(job, "int32 collSumReproducible element " + std::to_string(i));
      break;
    }
  ++job.checks;
  // Nonblocking, as the blocking call.
  const size_t count = 5000;
  std::vector<std::vector<uint8_t>> set;
  for (int v = 0; v < job.n; ++v) set.push_back(makeVector(999, v, count, collFloat32));
  const auto want = reference(set, count, collFloat32, 1);
  std::vector<uint8_t> got(count * 4);
  collRequest_t req = nullptr;
  call(job, collIallReduce(set[job.rank].data(), got.data(), count, collFloat32, collSumReproducible, job.comm, &req),
       "iallreduce");
  call(job, collWait(&req), "wait");
  ++job.checks;
  if (got != want) fail(job, "nonblocking all-reduce differs from the reproducible sum");
}

}  // namespace

int main(int argc, char** argv) {
  bool big = true;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--small") big = false;
    else {
      fprintf(stderr, "usage: %s [--small]\n", argv[0]);
      return 2;
    }
  }
  Job job;
  if (collCommInitFromEnv(&job.comm) != collSuccess) {
    fprintf(stderr, "mp_repro: collCommInitFromEnv failed: %s\n", collGetLastError(nullptr));
    return 1;
  }
  collCommUserRank(job.comm, &job.rank);
  collCommCount(job.comm, &job.n);
  const char* mode = getenv("COLL_REPRODUCIBLE");
  const bool modeOn = mode && std::string(mode) == "1";
  // 1 (and 1000 of float32 on 2 ranks): all-gather path; 1000 and 70001: all-to-all path, with a
  // count that does not split evenly before rounding up; 600000 with --big: several MB.
  std::vector<size_t> counts = {1, 1000, 70001};
  if (big) counts.push_back(600000);
  randomCases(job, counts, modeOn);
  specialCases(job);
  otherCases(job);
  call(job, collCommDestroy(job.comm), "destroy");
  if (job.failures) {
    fprintf(stderr, "rank %d: %d of %ld checks failed\n", job.rank, job.failures, job.checks);
    return 1;
  }
  if (job.rank == 0) printf("mp_repro: %d ranks, %ld checks passed\n", job.n, job.checks);
  return 0;
}
