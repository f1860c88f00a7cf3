// Data check of the *_perf tools: a deterministic input pattern and the exact expected
// output of every collective. Inputs are small non-negative integers chosen so that every
// partial result of every reduction order is exactly representable in the data type
// (bfloat16 holds integers up to 256, half up to 2048), so any difference is a real error.
// Integer types wrap like the hardware does (int8 sums overflow on purpose); avg divides
// the wrapped sum once, truncating for integers, as the library documents.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collective.h"
#include "common.hpp"

namespace perf {

// IEEE binary16 and bfloat16, round to nearest even (NaN stays NaN).
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
uint16_t floatToBf16(float f);
float bf16ToFloat(uint16_t b);

// Element i of a typed buffer, as a double (exact for every value the pattern produces).
double loadValue(const void* buf, size_t i, collDataType_t dt);
// Stores v converted to dt (integers wrap, floats round to nearest even).
void storeValue(void* buf, size_t i, collDataType_t dt, double v);
// v as it reads back after a store in dt.
double roundToType(double v, collDataType_t dt);

// The input pattern of one (type, op, communicator size). Collectives without a
// reduction use kNoOp.
constexpr collRedOp_t kNoOp = collNumOps;
// The reproducible sum and average give the same values as sum and average on the
// pattern (its sums are exact), so the pattern treats them as those.
inline collRedOp_t plainOp(collRedOp_t op) {
  return op == collSumReproducible ? collSum : op == collAvgReproducible ? collAvg : op;
}
class Pattern {
 public:
  Pattern(collDataType_t dt, collRedOp_t op, int nranks);
  // Input element `elem` of `rank`.
  int64_t value(int rank, size_t elem) const;
  // The reduction over all ranks of value(., elem), in dt's arithmetic.
  double reduced(size_t elem) const;
  // Is got an acceptable output where `expected` is exact? (avg of a float type may
  // round its one division differently; everything else must be bit-exact).
  bool matches(double got, double expected) const;
  collDataType_t type() const { return dt_; }
  int64_t range() const { return range_; }

 private:
  collDataType_t dt_;
  collRedOp_t op_;
  int nranks_;
  int64_t range_;  // values are in [0, range_) (prod: 1 or 2)
};

// Fills the first `count` elements of buf with rank's inputs.
void fillInput(void* buf, size_t count, const Pattern& p, int rank);

// The expected value of output element i (0 <= i < k.recvCount) of rank `rank`.
double expectedOutput(Coll c, const Pattern& p, const Counts& k, int nranks, int rank,
                      int root, size_t i);
// Does this rank's output carry a defined result? (reduce, gather: root only)
bool outputDefined(Coll c, int rank, int root);
// Wrong elements among the k.recvCount elements at out.
size_t countWrong(Coll c, const Pattern& p, const Counts& k, int nranks, int rank, int root,
                  const void* out);

}  // namespace perf
