// Device buffers and streams at the C API edge: which calls are stream-ordered, and how
// one of them, a group with some of them, or a nonblocking one reaches the communicator's
// stream executor (cuda/stream_ops.hpp). CUDA builds only.
#pragma once

#include "coll_config.h"

#if COLL_HAVE_CUDA
#include <memory>
#include <vector>

#include "comm/handles.hpp"

namespace coll {

// Gives the communicator the CUDA runtime when a device is usable (c.cuda stays null
// otherwise, and every call takes the host path).
void attachCuda(collComm& c);

// Device buffers, or an explicit stream, make the op stream-ordered.
bool onStream(collComm& c, const OpArgs& op, collStream_t stream);

// Enqueues one stream-ordered op and returns without waiting; `done`, when given, is told
// once the op is over (results in device memory) or has failed.
void enqueueOnStream(collComm& c, const OpArgs& op, void* stream, cuda::JobDone done = nullptr);

// A nonblocking op on device buffers (collI*): staged like a stream-ordered one, but on a
// stream of the executor's own, so it waits for no application stream (the caller makes
// sure the input is ready, as with CUDA-aware MPI). The request completes once the
// results are in device memory.
std::shared_ptr<Request> submitDeviceOp(collComm& c, const OpArgs& op);

// A host-buffer op waits for the device ops issued before it on this communicator, so
// that every rank runs the communicator's ops in issue order.
void drainStreams(collComm& c);

// One communicator's share of a group in which at least one op is stream-ordered, launched
// as one unit at collGroupEnd (doc/cuda.md, "Groups"). Returns a request to wait for when
// the group also holds host-buffer ops without a stream, whose results must be in host
// memory when collGroupEnd returns; null otherwise (nothing to wait for).
std::shared_ptr<Request> launchGroup(collComm& c, const std::vector<GroupedOp>& ops);

}  // namespace coll
#endif
