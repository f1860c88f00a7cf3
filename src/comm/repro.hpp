// Reproducible sums and averages (collSumReproducible, collAvgReproducible, and collSum /
// collAvg of floating types under COLL_REPRODUCIBLE=1).
//
// The result of an element is a function of the set of the ranks' values of that element
// alone. For each element, E is the smallest power of two above every finite value's
// magnitude (from the largest exponent among them); each value is rounded to a multiple
// of 2^(E - kReproFracBits) (float64: of 2^(E - 2 kReproFracBits)) and these integers are
// added exactly; the exact integer sum is rounded once to the type (nearest even). NaN
// and infinities propagate as IEEE addition does. How the values reach the rank that
// adds them, and in which order they are added, cannot change a bit.
//
// The ranks exchange their inputs rather than partial sums: an all-to-all gives each rank
// every rank's values of one block of elements, which it adds; an all-gather (all-reduce)
// or a gather (reduce) then delivers the blocks. Small calls all-gather the whole input
// and every rank adds all of it. doc/algorithms.md has the error bound.
#pragma once

#include <cstddef>
#include <functional>

#include "collective.h"
#include "base/op.hpp"

namespace coll {

class Team;

// Fraction bits of the fixed-point grid relative to each element's E.
constexpr int kReproFracBits = 50;
// The integer sums have room for this many ranks.
constexpr int kReproMaxRanks = 4096;

// Whether `op` (a reduction, pre-multiplied sums already staged) runs reproducibly: a
// reproducible op on a floating type, or sum/avg of a floating type when `mode` is on.
bool runsReproducibly(const OpArgs& op, bool mode);
// The plain op an integer type runs for collSumReproducible / collAvgReproducible (sum,
// avg): exact already. Other ops are returned unchanged.
collRedOp_t integerPlainOp(collRedOp_t op);

// out[i] = the reproducible sum of in[p * stride + i] over p < nslices, for i < m (divided
// by `divisor`, correctly rounded, when divisor > 1). dt: float16, bfloat16, float32 or
// float64. out may not overlap in.
void reproSumSlices(void* out, const void* in, size_t stride, int nslices, size_t m,
                    collDataType_t dt, int divisor);

// Runs the reproducible all-reduce, reduce or reduce-scatter `op` on `team`, issuing
// plain collectives (all-to-all, all-gather, gather) through runSub.
void runReproducible(Team& team, const OpArgs& op, const std::function<void(const OpArgs&)>& runSub);

}  // namespace coll
