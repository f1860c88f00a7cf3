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

}  // namespace testing_coll
