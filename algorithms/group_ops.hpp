// Small blocking building blocks over a subset of ranks, for the leader-based paths of
// the hierarchical algorithms (latency-bound sizes). Every wait goes through Progress.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/exec.hpp"
#include "collective.h"

namespace coll {

// Recursive-doubling all-reduce of `count` elements in `buf` among `members` (this rank
// is members[pos]). Members beyond the largest power of two fold into a partner first.
// Both partners of a round combine in the same operand order (lower position first), so
// every member ends with the same bits. tmp holds count elements. No averaging.
void groupRdAllReduce(Progress& pg, const std::vector<int>& members, int pos, void* buf, void* tmp,
                      size_t count, collDataType_t dt, collRedOp_t op);

// Waits for a set of transfers through pg.
void waitXfers(Progress& pg, std::vector<Xfer>& xs);

}  // namespace coll
