// Pure logic of the CUDA IPC collectives (no CUDA header, unit-tested without a GPU): when
// a device-buffer collective may run over CUDA IPC, how an op is cut into steps that fit
// each rank's device scratch, which slice of a step each rank reduces, and the per-op
// header the ranks exchange through the host collectives. The mapping of the peers'
// scratch is the transport's (transport/cuda_ipc).
//
// The path: every rank of the communicator is on one host and owns a device scratch
// buffer whose IPC handle the others have opened. A step copies this rank's input into
// its scratch; every rank then reads the pieces it needs straight from its peers'
// scratch (copy engine, cudaMemcpyDefault: NVLink/P2P when the devices can, through the
// driver otherwise, and plain device copies for ranks sharing one GPU), reduces its own
// slice with the reduction kernels, and the results are read back the same way. Host
// collectives on the communicator separate the phases of a step (see ipc_collectives.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/op.hpp"
#include "cuda/stream_plan.hpp"

namespace coll::cuda {

// ---- eligibility

// The communicator may use the IPC path: more than one rank, all on one host, and
// COLL_CUDA_IPC not 0. Every input is the same on every rank (the topology is agreed;
// the tunable should be set alike, and a rank set otherwise is caught by the header).
bool ipcCommEligible(int nranks, int nhosts, bool enabled);
// The collectives the IPC path runs (send/recv and all-to-all stay on host staging).
bool ipcServes(OpKind kind);
// Every side the op uses on this rank is device memory.
bool ipcBuffersOnDevice(const StreamOpSpec& spec);

// ---- planning

struct ElemRange {
  size_t offset = 0;
  size_t count = 0;
};

// Part i of n elements cut into `parts` nearly equal parts (the first n % parts get one
// more): the slice of a step that rank i reduces.
ElemRange sliceOf(size_t n, int parts, int i);

// Scratch regions are aligned like staging (copies are fastest on aligned ends).
constexpr size_t kIpcAlign = 256;

// How one op uses each rank's scratch. Elements are those of OpArgs::count: the whole
// buffer for all-reduce, broadcast and reduce, one rank's block for all-gather and
// reduce-scatter (a step then covers the same range of every block).
struct IpcPlan {
  size_t stepElems = 0;  // elements per step (the last step may be shorter)
  size_t steps = 0;      // 0 for count 0
  // Byte offsets in a rank's scratch: its input (inSlots slots of inSlotBytes), the
  // pieces it gathers from its peers (nranks slots of slotBytes, indexed by rank; its
  // own stays unused) and its reduced slice (outOffset, slotBytes).
  size_t inSlots = 0;
  size_t inSlotBytes = 0;
  size_t gatherOffset = 0;
  size_t slotBytes = 0;
  size_t outOffset = 0;
  size_t scratchUsed = 0;
  ElemRange step(size_t s, size_t count) const;
};

// Depends only on its arguments (every rank plans alike from the agreed scratch size).
// Throws collInvalidArgument when not even one element per step fits in scratchBytes.
IpcPlan planIpc(OpKind kind, size_t count, size_t elemSize, int nranks, size_t scratchBytes);

// ---- the per-op header, exchanged through a host all-gather (raw bytes, fixed layout)

constexpr uint32_t kIpcHeaderMagic = 0x48504943u;  // "CIPH"
constexpr uint32_t kIpcVersion = 1;

// Sent at the start of every IPC-eligible collective, on the IPC path and on the host
// staging path alike, so that the ranks agree on the path (IPC only if every rank can)
// and a rank that called something else is caught by a check instead of mixing bytes.
struct IpcOpHeader {
  uint32_t magic = kIpcHeaderMagic;
  uint32_t version = kIpcVersion;
  int32_t rank = -1;
  int32_t kind = 0;   // OpKind
  int32_t dtype = 0;
  int32_t op = 0;
  int32_t root = 0;
  int32_t ipc = 0;    // 1: this rank can run the op over IPC
  uint64_t count = 0;
};
static_assert(sizeof(IpcOpHeader) == 40, "exchanged as raw bytes");

IpcOpHeader makeHeader(const OpArgs& op, int rank, bool ipc);
// Checks every rank's header against this rank's op (collInvalidUsage naming the rank,
// the field and both values; collRemoteError for a malformed header) and returns
// whether every rank can use IPC.
bool agreeHeaders(const std::vector<IpcOpHeader>& all, const OpArgs& op);

}  // namespace coll::cuda
