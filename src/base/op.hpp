// One operation as the layers below the API see it: validated arguments, no handles.
#pragma once

#include <cstddef>

#include "collective.h"

namespace coll {

// Gather and Scatter come last so that the older kinds keep their numbers (the call
// signatures carry them, and the tuner probe indexes them).
enum class OpKind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Send, Recv, Barrier, Gather, Scatter };
inline constexpr int kNumOpKinds = 11;
const char* opKindName(OpKind k);

struct OpArgs {
  OpKind kind = OpKind::AllReduce;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t count = 0;  // elements, with the meaning collective.h gives each call
  collDataType_t dtype = collFloat32;
  collRedOp_t op = collSum;
  int root = 0;  // root for rooted collectives, peer for send/recv
  // A pre-multiplied sum (collRedOpCreatePreMulSum), resolved at the API edge: op is then
  // collSum, and this rank's input is multiplied by `scalar` (one element of dtype, in
  // host memory) before it is summed (comm/premul.hpp).
  bool preMul = false;
  alignas(8) unsigned char scalar[8] = {};
  bool isP2P() const { return kind == OpKind::Send || kind == OpKind::Recv; }
  bool isRooted() const {
    return kind == OpKind::Broadcast || kind == OpKind::Reduce || kind == OpKind::Gather || kind == OpKind::Scatter;
  }
};

}  // namespace coll
