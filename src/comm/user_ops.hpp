// User-defined reduction operators (collRedOpCreatePreMulSum / collRedOpDestroy): which
// op numbers are live, on which communicator, with which data type and scalar.
#pragma once

#include "collective.h"
#include "base/op.hpp"

struct collComm;

namespace coll {

// Live pre-multiplied sums one communicator may hold at once.
inline constexpr int kMaxUserOpsPerComm = 1024;

// Makes the pre-multiplied sum of `dt` scaled by the element at `scalar` (host memory)
// on `comm`; returns its op number. Throws collInvalidUsage when comm holds the maximum.
collRedOp_t createPreMulSum(const collComm* comm, const void* scalar, collDataType_t dt);
// Throws for a built-in op (collInvalidArgument), one of another communicator, one
// destroyed before or never made.
void destroyUserOp(const collComm* comm, collRedOp_t op);
// For a reducing call whose op is a user op: checks that it is live on `comm` and made
// for the call's data type, and turns it into op collSum with preMul and the scalar set.
// Other calls are left as they are.
void resolveUserOp(const collComm* comm, OpArgs& op);
// Forgets every op of a communicator that is being freed (so that a communicator made
// later at the same address does not inherit them).
void dropUserOps(const collComm* comm);

}  // namespace coll
