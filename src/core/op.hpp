// One operation as the layers below the API see it: validated arguments, no handles.
#pragma once

#include <cstddef>

#include "collective.h"

namespace coll {

enum class OpKind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Send, Recv, Barrier };
const char* opKindName(OpKind k);

struct OpArgs {
  OpKind kind = OpKind::AllReduce;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t count = 0;  // elements, with the meaning collective.h gives each call
  collDataType_t dtype = collFloat32;
  collRedOp_t op = collSum;
  int root = 0;  // root for rooted collectives, peer for send/recv
  bool isP2P() const { return kind == OpKind::Send || kind == OpKind::Recv; }
};

}  // namespace coll
