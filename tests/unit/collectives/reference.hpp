// Simple reference values for the collective tests: each rank's input element is a
// small integer chosen so that every reduction is exact in every data type (also
// float16/bfloat16), and the expected result is computed element by element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "collective.h"
#include "base/reduce.hpp"

namespace testing_coll {

// Every data type and reduction of the C API, for tests that sweep them all.
inline constexpr collDataType_t kTypes[] = {collInt8,   collUint8,   collInt16,    collUint16,
                                            collInt32,  collUint32,  collInt64,    collUint64,
                                            collFloat16, collBfloat16, collFloat32, collFloat64};
// The arithmetic reductions, which every type takes; the bitwise ones take integers only.
inline constexpr collRedOp_t kOps[] = {collSum, collProd, collMax, collMin, collAvg};
inline constexpr collRedOp_t kBitwiseOps[] = {collBand, collBor, collBxor};

// Counts failures from many rank threads and reports the first ten, so one wrong
// configuration does not flood the log with every element it got wrong.
struct Failures {
  std::mutex mu;
  int count = 0;
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (++count <= 10) ADD_FAILURE() << what;
  }
};

// A small integer for (seed, rank, index): in [-4, 4] for sums, in {-2,-1,1,2} for products.
inline int64_t smallValue(uint32_t seed, int rank, size_t i, collRedOp_t op) {
  uint64_t h = (static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(rank) << 40) ^ i;
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  if (op == collProd) {
    static const int64_t v[4] = {-2, -1, 1, 2};
    return v[h & 3];
  }
  return static_cast<int64_t>(h % 9) - 4;
}

// Stores integer v into element i of buf as type dt (wrapping for small/unsigned types).
inline void storeValue(void* buf, size_t i, collDataType_t dt, double v) {
  switch (dt) {
    case collInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
    case collInt16: static_cast<int16_t*>(buf)[i] = static_cast<int16_t>(static_cast<int64_t>(v)); break;
    case collUint16: static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(static_cast<int64_t>(v)); break;
    case collUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case collInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(static_cast<int64_t>(v)); break;
    case collUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(static_cast<int64_t>(v)); break;
    case collInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case collUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(static_cast<int64_t>(v)); break;
    case collFloat16: static_cast<uint16_t*>(buf)[i] = coll::floatToHalf(static_cast<float>(v)); break;
    case collBfloat16: static_cast<uint16_t*>(buf)[i] = coll::floatToBf16(static_cast<float>(v)); break;
    case collFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case collFloat64: static_cast<double*>(buf)[i] = v; break;
    default: break;
  }
}

inline bool isUnsigned(collDataType_t dt) {
  return dt == collUint8 || dt == collUint16 || dt == collUint32 || dt == collUint64;
}
inline bool isFloat(collDataType_t dt) {
  return dt == collFloat16 || dt == collBfloat16 || dt == collFloat32 || dt == collFloat64;
}
// Every reduction dt takes: the arithmetic ones, and the bitwise ones for integers.
inline std::vector<collRedOp_t> opsFor(collDataType_t dt) {
  std::vector<collRedOp_t> ops(std::begin(kOps), std::end(kOps));
  if (!isFloat(dt)) ops.insert(ops.end(), std::begin(kBitwiseOps), std::end(kBitwiseOps));
  return ops;
}

// The exact reduction of the ranks' values for element i, as stored in type dt.
inline void expectedValue(void* out, size_t i, collDataType_t dt, collRedOp_t op, uint32_t seed, int n) {
  // Integers are combined in 64 bits and wrap when stored, like the library's modular
  // arithmetic; small types see the values already wrapped to their width first.
  auto asType = [&](int64_t v) -> int64_t {
    uint8_t tmp[8];
    storeValue(tmp, 0, dt, static_cast<double>(v));
    switch (dt) {
      case collInt8: return *reinterpret_cast<int8_t*>(tmp);
      case collUint8: return *reinterpret_cast<uint8_t*>(tmp);
      case collInt16: return *reinterpret_cast<int16_t*>(tmp);
      case collUint16: return *reinterpret_cast<uint16_t*>(tmp);
      case collInt32: return *reinterpret_cast<int32_t*>(tmp);
      case collUint32: return *reinterpret_cast<uint32_t*>(tmp);
      default: return v;
    }
  };
  // uint64 values above 2^63 (wrapped negatives) must compare as unsigned.
  auto greater = [&](int64_t a, int64_t b) {
    return dt == collUint64 ? static_cast<uint64_t>(a) > static_cast<uint64_t>(b) : a > b;
  };
  auto u64 = [](int64_t x) { return static_cast<uint64_t>(x); };
  int64_t acc = asType(smallValue(seed, 0, i, op));
  for (int r = 1; r < n; ++r) {
    int64_t v = asType(smallValue(seed, r, i, op));
    switch (op) {
      // Wrapping, as the library computes integers (in the unsigned type: no overflow UB).
      case collSum: case collAvg: acc = static_cast<int64_t>(u64(acc) + u64(v)); break;
      case collProd: acc = static_cast<int64_t>(u64(acc) * u64(v)); break;
      case collMax: acc = greater(v, acc) ? v : acc; break;
      case collMin: acc = greater(acc, v) ? v : acc; break;
      case collBand: acc &= v; break;
      case collBor: acc |= v; break;
      case collBxor: acc ^= v; break;
      default: break;
    }
    if (op == collProd) acc = asType(acc);
  }
  if (op == collAvg) {
    if (isFloat(dt)) {
      double d = static_cast<double>(acc) / n;
      storeValue(out, i, dt, d);
      return;
    }
    acc = asType(acc);
    if (isUnsigned(dt)) {
      uint64_t u = static_cast<uint64_t>(acc);
      if (dt == collUint8) u &= 0xff;
      if (dt == collUint16) u &= 0xffff;
      if (dt == collUint32) u &= 0xffffffffull;
      if (dt == collUint64) {  // beyond 2^53: a trip through double would round
        static_cast<uint64_t*>(out)[i] = u / n;
        return;
      }
      storeValue(out, i, dt, static_cast<double>(static_cast<int64_t>(u / n)));
      return;
    }
    acc /= n;
  }
  storeValue(out, i, dt, static_cast<double>(acc));
}

// Element i of buf as double (for messages and float tolerance checks).
inline double loadValue(const void* buf, size_t i, collDataType_t dt) {
  switch (dt) {
    case collInt8: return static_cast<const int8_t*>(buf)[i];
    case collUint8: return static_cast<const uint8_t*>(buf)[i];
    case collInt16: return static_cast<const int16_t*>(buf)[i];
    case collUint16: return static_cast<const uint16_t*>(buf)[i];
    case collInt32: return static_cast<const int32_t*>(buf)[i];
    case collUint32: return static_cast<const uint32_t*>(buf)[i];
    case collInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case collUint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case collFloat16: return coll::halfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case collBfloat16: return coll::bf16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case collFloat32: return static_cast<const float*>(buf)[i];
    case collFloat64: return static_cast<const double*>(buf)[i];
    default: return 0;
  }
}

// Whether element i of got is the reference's element i: the same bits, or for an
// average of floating-point values within rounding of it.
inline bool sameValue(const void* got, const void* want, size_t i, collDataType_t dt, collRedOp_t op) {
  size_t es = collTypeSize(dt);
  if (memcmp(static_cast<const char*>(got) + i * es, static_cast<const char*>(want) + i * es, es) == 0) return true;
  if (op != collAvg || !isFloat(dt)) return false;
  double g = loadValue(got, i, dt), w = loadValue(want, i, dt);
  double tol = dt == collFloat64 ? 1e-12 : dt == collFloat32 ? 1e-6 : 1e-2;
  return std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w));
}

// Fills `count` elements of rank r's contribution, from element offsetElems on.
inline void fillInput(std::vector<char>& buf, size_t offsetElems, size_t count, collDataType_t dt, collRedOp_t op,
                 uint32_t seed, int rank) {
  for (size_t i = 0; i < count; ++i)
    storeValue(buf.data(), offsetElems + i, dt, static_cast<double>(smallValue(seed, rank, offsetElems + i, op)));
}

}  // namespace testing_coll
