// Data type and reduction op metadata shared by the API edge, algorithms and tools.
#pragma once

#include <cstddef>

#include "collective.h"

namespace coll {

inline bool validType(collDataType_t dt) { return dt >= 0 && dt < collNumTypes; }
inline bool validOp(collRedOp_t op) { return op >= 0 && op < collNumOps; }
size_t typeSize(collDataType_t dt);  // 0 for invalid
const char* typeName(collDataType_t dt);  // "float32"...; "invalid" for bad values
const char* opName(collRedOp_t op);       // "sum"...
bool isFloatType(collDataType_t dt);
bool isBitwiseOp(collRedOp_t op);  // band, bor, bxor: integer types only
// Whether an input of zeros leaves the result alone (sums and averages, reproducible or not).
inline bool zerosNeutral(collRedOp_t op) {
  return op == collSum || op == collAvg || op == collSumReproducible || op == collAvgReproducible;
}

}  // namespace coll
