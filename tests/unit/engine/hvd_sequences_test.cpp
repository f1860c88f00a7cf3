// Random rounds of engine calls, as a training step's many tensors: every rank submits
// the same named operations (allreduce with each reduction, some compressed to fp16 or
// bf16, grouped allreduce, allgather
// with a different number of rows per rank, broadcast from any root, alltoall with
// uneven splits, reducescatter, and allreduces on a process set of some ranks), each rank
// in its own random order, then waits on them in another. Names repeat from round to
// round with the same shapes (the response cache) and new values. Every output is checked
// against values computed here.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../collectives/reference.hpp"
#include "hvd_harness.hpp"

using namespace hvdtest;

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// A small integer for (round, op, rank, element), exact in every sum of a few ranks.
double val(int round, int op, int rank, int64_t i) {
  return static_cast<double>(mix((static_cast<uint64_t>(round) << 48) ^ (static_cast<uint64_t>(op) << 32) ^
                                 (static_cast<uint64_t>(rank) << 24) ^ static_cast<uint64_t>(i)) % 9) - 4;
}

enum class Kind { Allreduce, Grouped, Allgather, Broadcast, Alltoall, Reducescatter, SetAllreduce, Count };

struct Spec {  // the same on every rank
  Kind kind;
  collDataType_t dt;
  hvd::ReduceOp op;
  int64_t cols;
  int64_t rows;  // allreduce/broadcast/reducescatter: rows of the input
  int root;
  hvd::Compression compression;  // allreduce of float32 sums and averages: none, fp16 or bf16
};

// Rows each rank contributes to an allgather, and sends to each rank in an alltoall.
int64_t gatherRows(int op, int rank) { return static_cast<int64_t>(mix(op * 131 + rank) % 3); }
int64_t splitRows(int op, int from, int to) { return static_cast<int64_t>(mix(op * 7919 + from * 31 + to) % 3); }

std::vector<Spec> drawSpecs(uint64_t seed, int count, int n) {
  std::mt19937_64 g(seed);
  std::vector<Spec> out;
  const collDataType_t types[] = {collFloat32, collFloat64, collInt32, collInt64};
  const hvd::ReduceOp ops[] = {hvd::ReduceOp::Sum, hvd::ReduceOp::Average, hvd::ReduceOp::Min, hvd::ReduceOp::Max};
  for (int i = 0; i < count; ++i) {
    Spec s;
    s.kind = static_cast<Kind>(g() % static_cast<int>(Kind::Count));
    if (s.kind == Kind::SetAllreduce && n < 3) s.kind = Kind::Allreduce;
    s.dt = types[g() % 4];
    s.op = ops[g() % 4];
    // Average of integers rounds; keep it to floating-point types.
    if (s.op == hvd::ReduceOp::Average && (s.dt == collInt32 || s.dt == collInt64)) s.op = hvd::ReduceOp::Sum;
    if (s.kind == Kind::Reducescatter && s.op != hvd::ReduceOp::Average) s.op = hvd::ReduceOp::Sum;
    static const int64_t colsChoice[] = {1, 3, 17, 256, 4099};
    s.cols = colsChoice[g() % 5];
    s.rows = 1 + static_cast<int64_t>(g() % 7);
    s.root = static_cast<int>(g() % n);
    // The small integers here survive fp16 and bf16 exactly, so compressed sums are exact.
    const int c = static_cast<int>(g() % 3);
    if (s.kind == Kind::Allreduce && g() % 2) s.dt = collFloat32;
    if (s.kind == Kind::Allreduce && s.dt == collFloat32 && (s.op == hvd::ReduceOp::Sum || s.op == hvd::ReduceOp::Average))
      s.compression = c == 1 ? hvd::Compression::fp16() : c == 2 ? hvd::Compression::bf16() : hvd::Compression::none();
    out.push_back(s);
  }
  return out;
}

// Values in and out of the buffers: the collective tests' helpers (every type).
void store(std::vector<char>& buf, int64_t i, collDataType_t dt, double v) {
  testing_coll::storeValue(buf.data(), static_cast<size_t>(i), dt, v);
}
double load(const void* p, int64_t i, collDataType_t dt) { return testing_coll::loadValue(p, static_cast<size_t>(i), dt); }

double reduce(hvd::ReduceOp op, const std::vector<double>& xs) {
  double acc = xs[0];
  for (size_t k = 1; k < xs.size(); ++k) {
    if (op == hvd::ReduceOp::Min) acc = std::min(acc, xs[k]);
    else if (op == hvd::ReduceOp::Max) acc = std::max(acc, xs[k]);
    else acc += xs[k];
  }
  return op == hvd::ReduceOp::Average ? acc / static_cast<double>(xs.size()) : acc;
}

bool near(double got, double want) { return std::fabs(got - want) <= 1e-6 * std::max(1.0, std::fabs(want)); }

struct Op {  // one rank's side of one operation
  std::vector<char> in, out, in2, out2;
  hvd::Handle h;
  bool member = true;
};

// COLL_TEST_SEQ_SEED=S draws other operations (S mixed with the test's seed).
void runRounds(int n, uint64_t seed, int rounds, int perRound) {
  if (const char* e = getenv("COLL_TEST_SEQ_SEED")) seed = seed * 1000003u + strtoull(e, nullptr, 10);
  const std::vector<Spec> specs = drawSpecs(seed, perRound, n);
  std::vector<std::string> errors(n);
  withComms(n, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    hvd::ProcessSet ps;
    const std::vector<int> setRanks = {0, n - 1};
    if (n >= 3) ps = ctx->add_process_set(setRanks);
    std::mt19937_64 mine(seed * 977 + r);
    auto fail = [&](const std::string& m) {
      if (errors[r].empty()) errors[r] = m;
    };
    for (int round = 0; round < rounds && errors[r].empty(); ++round) {
      std::vector<Op> ops(specs.size());
      std::vector<int> order(specs.size());
      for (size_t j = 0; j < specs.size(); ++j) order[j] = static_cast<int>(j);
      std::shuffle(order.begin(), order.end(), mine);
      for (int j : order) {
        const Spec& s = specs[j];
        Op& o = ops[j];
        const size_t es = collTypeSize(s.dt);
        const std::string name = "op" + std::to_string(j);
        auto tensor = [&](std::vector<char>& b, int64_t rows) {
          return hvd::Tensor{b.data(), s.dt, {rows, s.cols}};
        };
        auto fillRows = [&](std::vector<char>& b, int64_t rows, int tag, int64_t base) {
          b.assign(static_cast<size_t>(rows * s.cols) * es + 1, 0);
          for (int64_t i = 0; i < rows * s.cols; ++i) store(b, i, s.dt, val(round, j * 4 + tag, r, base + i));
        };
        try {
          switch (s.kind) {
            case Kind::Allreduce:
            case Kind::SetAllreduce:
              o.member = s.kind == Kind::Allreduce || r == 0 || r == n - 1;
              if (!o.member) break;
              fillRows(o.in, s.rows, 0, 0);
              o.out.assign(o.in.size(), 0);
              o.h = ctx->allreduce_async(tensor(o.in, s.rows), tensor(o.out, s.rows), name,
                                         {.op = s.op, .compression = s.compression,
                                          .process_set = s.kind == Kind::SetAllreduce ? ps : hvd::ProcessSet{}});
              break;
            case Kind::Grouped:
              fillRows(o.in, s.rows, 0, 0);
              fillRows(o.in2, 1, 1, 0);
              o.out.assign(o.in.size(), 0);
              o.out2.assign(o.in2.size(), 0);
              o.h = ctx->grouped_allreduce_async({tensor(o.in, s.rows), tensor(o.in2, 1)},
                                                 {tensor(o.out, s.rows), tensor(o.out2, 1)}, name, {.op = s.op});
              break;
            case Kind::Allgather:
              fillRows(o.in, gatherRows(j, r), 0, 0);
              o.h = ctx->allgather_async(tensor(o.in, gatherRows(j, r)), name);
              break;
            case Kind::Broadcast:
              fillRows(o.in, s.rows, 0, 0);
              o.out.assign(o.in.size(), 0);
              o.h = ctx->broadcast_async(tensor(o.in, s.rows), tensor(o.out, s.rows), s.root, name);
              break;
            case Kind::Alltoall: {
              std::vector<int64_t> splits(n);
              int64_t rows = 0;
              for (int q = 0; q < n; ++q) rows += splits[q] = splitRows(j, r, q);
              fillRows(o.in, rows, 0, 0);
              o.h = ctx->alltoall_async(tensor(o.in, rows), splits, name);
              break;
            }
            case Kind::Reducescatter:
              fillRows(o.in, s.rows + n, 0, 0);  // at least a row per rank
              o.h = ctx->reducescatter_async(tensor(o.in, s.rows + n), name, {.op = s.op});
              break;
            default: break;
          }
        } catch (const std::exception& e) {
          fail("round " + std::to_string(round) + " op " + std::to_string(j) + " submit: " + e.what());
        }
      }
      std::shuffle(order.begin(), order.end(), mine);
      for (int j : order) {
        Op& o = ops[j];
        if (!o.member || !o.h.valid()) continue;
        try {
          hvd::synchronize(o.h);
        } catch (const std::exception& e) {
          fail("round " + std::to_string(round) + " op " + std::to_string(j) + " wait: " + e.what());
        }
      }
      if (!errors[r].empty()) break;
      // Checks.
      for (size_t j = 0; j < specs.size(); ++j) {
        const Spec& s = specs[j];
        Op& o = ops[j];
        if (!o.member) continue;
        const int jj = static_cast<int>(j);
        const std::string where = "round " + std::to_string(round) + " op " + std::to_string(j) + " kind " +
                                  std::to_string(static_cast<int>(s.kind)) + ": ";
        auto reducedOver = [&](const std::vector<int>& ranks, int tag, int64_t i) {
          std::vector<double> xs;
          for (int p : ranks) xs.push_back(val(round, jj * 4 + tag, p, i));
          return reduce(s.op, xs);
        };
        std::vector<int> all(n);
        for (int p = 0; p < n; ++p) all[p] = p;
        auto checkReduced = [&](const std::vector<char>& out, int64_t elems, const std::vector<int>& ranks, int tag) {
          for (int64_t i = 0; i < elems; ++i)
            if (!near(load(out.data(), i, s.dt), reducedOver(ranks, tag, i))) {
              fail(where + "element " + std::to_string(i) + " is " + std::to_string(load(out.data(), i, s.dt)) +
                   ", expected " + std::to_string(reducedOver(ranks, tag, i)));
              return;
            }
        };
        switch (s.kind) {
          case Kind::Allreduce: checkReduced(o.out, s.rows * s.cols, all, 0); break;
          case Kind::SetAllreduce: checkReduced(o.out, s.rows * s.cols, setRanks, 0); break;
          case Kind::Grouped:
            checkReduced(o.out, s.rows * s.cols, all, 0);
            checkReduced(o.out2, s.cols, all, 1);
            break;
          case Kind::Broadcast:
            for (int64_t i = 0; i < s.rows * s.cols; ++i)
              if (load(o.out.data(), i, s.dt) != val(round, jj * 4, s.root, i)) {
                fail(where + "not the root's element " + std::to_string(i));
                break;
              }
            break;
          case Kind::Allgather: {
            const hvd::Output& out = o.h.output();
            int64_t at = 0;
            for (int p = 0; p < n; ++p)
              for (int64_t i = 0; i < gatherRows(jj, p) * s.cols; ++i, ++at)
                if (load(out.tensor.data, at, s.dt) != val(round, jj * 4, p, i)) {
                  fail(where + "rank " + std::to_string(p) + "'s element " + std::to_string(i));
                  p = n;
                  break;
                }
            if (out.tensor.shape.empty() || out.tensor.num_elements() != at) fail(where + "output shape");
            break;
          }
          case Kind::Alltoall: {
            const hvd::Output& out = o.h.output();
            int64_t at = 0;
            for (int p = 0; p < n; ++p) {
              if (static_cast<int>(out.received_splits.size()) != n || out.received_splits[p] != splitRows(jj, p, r)) {
                fail(where + "received splits");
                break;
              }
              int64_t first = 0;  // rank p's rows before those it sends to r
              for (int q = 0; q < r; ++q) first += splitRows(jj, p, q);
              for (int64_t i = 0; i < splitRows(jj, p, r) * s.cols; ++i, ++at)
                if (load(out.tensor.data, at, s.dt) != val(round, jj * 4, p, first * s.cols + i)) {
                  fail(where + "from rank " + std::to_string(p) + " element " + std::to_string(i));
                  break;
                }
            }
            break;
          }
          case Kind::Reducescatter: {
            const hvd::Output& out = o.h.output();
            const int64_t rows = s.rows + n, base = rows / n, extra = rows % n;
            const int64_t mineRows = base + (r < extra ? 1 : 0), first = r * base + std::min<int64_t>(r, extra);
            if (out.tensor.num_elements() != mineRows * s.cols) {
              fail(where + "output has " + std::to_string(out.tensor.num_elements()) + " elements");
              break;
            }
            for (int64_t i = 0; i < mineRows * s.cols; ++i)
              if (!near(load(out.tensor.data, i, s.dt), reducedOver(all, 0, first * s.cols + i))) {
                fail(where + "element " + std::to_string(i));
                break;
              }
            break;
          }
          default: break;
        }
      }
    }
    auto st = ctx->stats();
    if (errors[r].empty() && rounds > 1 && st.cache_hits == 0) fail("no cache hits over repeated names");
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(HvdSequences, TwoRanks) { runRounds(2, 11, 12, 16); }
TEST(HvdSequences, ThreeRanksWithAProcessSet) { runRounds(3, 12, 10, 16); }
TEST(HvdSequences, FourRanksWithAProcessSet) { runRounds(4, 13, 8, 14); }

}  // namespace
