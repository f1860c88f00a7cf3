// Pre-multiplied sums: each rank multiplies its own input by its own scalar, then the
// ranks' products are summed. The scaling is one pass over the rank's input before the
// algorithm runs; the algorithms themselves only ever see a plain sum, so every algorithm
// and transport computes it, and every rank gets the same bits as for any sum.
#pragma once

#include <cstddef>

#include "collective.h"
#include "base/op.hpp"

namespace coll {

class Comm;

// dst[i] = src[i] * scalar for i < count, in the type dt (scalar: one element of dt).
// Integers wrap modulo 2^bits; float16 and bfloat16 are multiplied exactly in float and
// rounded once (nearest even). dst may equal src.
void scaleBuffer(void* dst, const void* src, size_t count, collDataType_t dt, const void* scalar);

// The plain sum that computes the pre-multiplied op `op` (op.preMul set, count > 0), with
// this rank's input already scaled: into the output where the output holds the whole
// input (all-reduce; reduce on the root), which the sum then reduces in place; otherwise
// into communicator scratch (reduce elsewhere, reduce-scatter). The caller's send buffer is
// never written, unless it is the output (in place).
OpArgs stagePreMul(Comm& comm, const OpArgs& op);

}  // namespace coll
