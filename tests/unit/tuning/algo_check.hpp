// Checks shared by the algorithm tests: expected values from the collectives' reference
// (tests/unit/collectives/reference.hpp), compared element by element, and a hash of
// each result so that ranks can be compared bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../collectives/reference.hpp"

namespace testing_coll {

// reference.hpp stores every expected value through a double, which rounds the average
// of uint64 sums that wrapped below zero (about 2^64 / n): compute that case exactly.
inline void expectedExact(void* out, size_t i, collDataType_t dt, collRedOp_t op, uint32_t seed, int n) {
  if (dt == collUint64 && op == collAvg) {
    uint64_t acc = 0;
    for (int r = 0; r < n; ++r) acc += static_cast<uint64_t>(smallValue(seed, r, i, op));
    static_cast<uint64_t*>(out)[i] = acc / static_cast<uint64_t>(n);
    return;
  }
  expectedValue(out, i, dt, op, seed, n);
}

inline void fillRank(void* buf, size_t first, size_t count, collDataType_t dt, collRedOp_t op, uint32_t seed,
                     int rank) {
  for (size_t i = 0; i < count; ++i)
    storeValue(buf, first + i, dt, static_cast<double>(smallValue(seed, rank, first + i, op)));
}

// Index of the first element of got[0, count) (holding elements first.. of the global
// index space) that differs from the reference, or -1. Float averages may round.
inline long firstWrong(const void* got, size_t first, size_t count, collDataType_t dt, collRedOp_t op,
                       uint32_t seed, int n) {
  const size_t es = collTypeSize(dt);
  std::vector<char> all((first + count) * es);
  for (size_t i = 0; i < count; ++i) {
    expectedExact(all.data(), first + i, dt, op, seed, n);
    const char* want = all.data() + (first + i) * es;
    const char* g = static_cast<const char*>(got) + i * es;
    if (memcmp(g, want, es) == 0) continue;
    if (op == collAvg && isFloat(dt)) {
      double a = loadValue(g, 0, dt), b = loadValue(want, 0, dt);
      double tol = dt == collFloat64 ? 1e-12 : dt == collFloat32 ? 1e-6 : 1e-2;
      if (std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b))) continue;
    }
    return static_cast<long>(i);
  }
  return -1;
}

inline uint64_t hashBytes(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
  return h;
}

// One rank's calls of the collectives for one (type, count, op): all-reduce, reduce (its
// root moves from call to call) and reduce-scatter against the reference, in place and
// out of place by turns; for sums also all-gather, broadcast, gather, scatter and, where
// asked, all-to-all, checked exactly. All-reduce results are hashed into `hashes`, so that the ranks can be
// compared bit for bit. Wrong values go to fail(); a call that fails returns false (the
// ranks are then out of step).
class RankCalls {
 public:
  RankCalls(int r, int n, collComm_t comm, std::vector<uint64_t>& hashes, bool allToAll)
      : r_(r), n_(n), comm_(comm), hashes_(hashes), allToAll_(allToAll) {}
  virtual ~RankCalls() = default;

  bool reductions(collDataType_t dt, size_t count, collRedOp_t op) {
    const bool inPlace = ++seed_ % 2 == 0;
    const size_t bytes = count * collTypeSize(dt);
    std::vector<char> in(bytes * n_ + 1), out(bytes * n_ + 1);
    fillRank(in.data(), 0, count, dt, op, seed_, r_);
    void* dst = inPlace ? in.data() : out.data();
    if (!ok("allreduce", collAllReduce(in.data(), dst, count, dt, op, comm_, nullptr), dt, op, count)) return false;
    check("allreduce", dst, 0, count, dt, op, inPlace);
    hashes_.push_back(hashBytes(dst, bytes));
    const int root = static_cast<int>((seed_ + count) % n_);
    fillRank(in.data(), 0, count, dt, op, seed_, r_);
    if (!ok("reduce", collReduce(in.data(), dst, count, dt, op, root, comm_, nullptr), dt, op, count)) return false;
    if (r_ == root) check("reduce", dst, 0, count, dt, op, inPlace);
    fillRank(in.data(), 0, count * n_, dt, op, seed_, r_);
    void* rsDst = inPlace ? in.data() + r_ * bytes : out.data();
    if (!ok("reducescatter", collReduceScatter(in.data(), rsDst, count, dt, op, comm_, nullptr), dt, op, count))
      return false;
    check("reducescatter", rsDst, r_ * count, count, dt, op, inPlace);
    return op != collSum || movement(dt, count, inPlace, (root + 1) % n_);
  }

  // Gather to and scatter from `root`, checked exactly; the other ranks pass NULL for the
  // buffer only the root uses.
  bool rooted(collDataType_t dt, size_t count, bool inPlace, int root) {
    const size_t bytes = count * collTypeSize(dt);
    const bool isRoot = r_ == root;
    std::vector<char> all(bytes * n_ + 1, 0x5a), mine(bytes + 1), want(bytes * n_ + 1);
    fillRank(mine.data(), 0, count, dt, collSum, seed_ + 7, r_);
    char* own = all.data() + r_ * bytes;
    if (inPlace && isRoot) memcpy(own, mine.data(), bytes);
    const void* src = inPlace && isRoot ? own : mine.data();
    if (!ok("gather", collGather(src, isRoot ? all.data() : nullptr, count, dt, root, comm_, nullptr), dt, collSum,
            count))
      return false;
    for (int p = 0; isRoot && p < n_; ++p) {
      fillRank(want.data(), 0, count, dt, collSum, seed_ + 7, p);
      if (memcmp(want.data(), all.data() + p * bytes, bytes) != 0)
        fail("gather", dt, collSum, count, inPlace, "root " + std::to_string(root) + ", block of rank " + std::to_string(p));
    }
    // Scatter: the root's block p holds values (root, p * count + i).
    fillRank(want.data(), 0, count * n_, dt, collSum, seed_ + 8, root);
    if (isRoot) all = want;
    memset(mine.data(), 0x5a, mine.size());
    void* dst = inPlace && isRoot ? own : mine.data();
    if (!ok("scatter", collScatter(isRoot ? all.data() : nullptr, dst, count, dt, root, comm_, nullptr), dt, collSum,
            count))
      return false;
    if (memcmp(dst, want.data() + r_ * bytes, bytes) != 0)
      fail("scatter", dt, collSum, count, inPlace, "root " + std::to_string(root));
    return true;
  }

  bool movement(collDataType_t dt, size_t count, bool inPlace, int root) {
    const size_t bytes = count * collTypeSize(dt);
    std::vector<char> mine(bytes + 1), out(bytes * n_ + 1), bc(bytes + 1);
    fillRank(mine.data(), 0, count, dt, collSum, seed_, r_);
    if (inPlace) memcpy(out.data() + r_ * bytes, mine.data(), bytes);
    const void* src = inPlace ? out.data() + r_ * bytes : mine.data();
    if (!ok("allgather", collAllGather(src, out.data(), count, dt, comm_, nullptr), dt, collSum, count)) return false;
    for (int p = 0; p < n_; ++p) {
      fillRank(mine.data(), 0, count, dt, collSum, seed_, p);
      if (memcmp(mine.data(), out.data() + p * bytes, bytes) != 0)
        fail("allgather", dt, collSum, count, inPlace, "block of rank " + std::to_string(p));
    }
    fillRank(bc.data(), 0, count, dt, collSum, seed_, root);
    std::vector<char> want(bc.begin(), bc.begin() + bytes);
    if (r_ != root) memset(bc.data(), 0x5a, bytes);
    void* dst = inPlace ? bc.data() : out.data();
    if (!ok("broadcast", collBroadcast(bc.data(), dst, count, dt, root, comm_, nullptr), dt, collSum, count))
      return false;
    if (bytes && memcmp(dst, want.data(), bytes) != 0) fail("broadcast", dt, collSum, count, inPlace, "root " + std::to_string(root));
    if (!rooted(dt, count, inPlace, root)) return false;
    if (!allToAll_) return true;
    // All-to-all: block p of rank r holds values (r, p).
    std::vector<char> a2a(bytes * n_ + 1), a2aOut(bytes * n_ + 1), blk(bytes + 1);
    for (int p = 0; p < n_; ++p) fillRank(a2a.data() + p * bytes, 0, count, dt, collSum, seed_ + p, r_);
    void* a2aDst = inPlace ? a2a.data() : a2aOut.data();
    if (!ok("alltoall", collAllToAll(a2a.data(), a2aDst, count, dt, comm_, nullptr), dt, collSum, count)) return false;
    for (int p = 0; p < n_; ++p) {
      fillRank(blk.data(), 0, count, dt, collSum, seed_ + r_, p);
      if (memcmp(blk.data(), static_cast<char*>(a2aDst) + p * bytes, bytes) != 0)
        fail("alltoall", dt, collSum, count, inPlace, "block from rank " + std::to_string(p));
    }
    return true;
  }

 protected:
  virtual void fail(const char* what, collDataType_t dt, collRedOp_t op, size_t count, bool inPlace,
                    const std::string& msg) = 0;
  bool ok(const char* what, collResult_t rc, collDataType_t dt, collRedOp_t op, size_t count) {
    if (rc != collSuccess) fail(what, dt, op, count, false, std::string("call failed: ") + collGetLastError(comm_));
    return rc == collSuccess;
  }
  void check(const char* what, const void* got, size_t first, size_t count, collDataType_t dt, collRedOp_t op,
             bool inPlace) {
    long bad = firstWrong(got, first, count, dt, op, seed_, n_);
    if (bad >= 0) fail(what, dt, op, count, inPlace, "element " + std::to_string(bad) + " wrong");
  }

  int r_, n_;
  collComm_t comm_;
  std::vector<uint64_t>& hashes_;
  bool allToAll_;
  uint32_t seed_ = 100;
};

}  // namespace testing_coll
