// From a validated collective (OpArgs) to what the stream executor stages: the bytes each
// side of the op touches on this rank (the rules of validateOp: a broadcast's non-root
// reads no send buffer, a reduce's non-root writes no receive buffer,
// and likewise a scatter's and a gather's) and whether the op
// may be pipelined in element chunks.
#pragma once

#include "base/op.hpp"
#include "cuda/stream_backend.hpp"
#include "cuda/stream_plan.hpp"

namespace coll::cuda {

// Pure: the caller says where the buffers live.
StreamOpSpec specForOp(const OpArgs& op, int nranks, int rank, bool sendOnDevice,
                       bool recvOnDevice, int device);

// Asks the backend where the buffers live (the current device when neither is device
// memory) and rejects buffers on two different devices.
StreamOpSpec describeOp(StreamBackend& cuda, const OpArgs& op, int nranks, int rank);

// True when either buffer of the op is device memory.
bool usesDeviceMemory(StreamBackend& cuda, const OpArgs& op);

}  // namespace coll::cuda
