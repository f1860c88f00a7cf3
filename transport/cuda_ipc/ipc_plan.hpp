// Pure logic of the CUDA IPC path (no CUDA header, unit-tested without a GPU): when a
// device-buffer collective may run over CUDA IPC, how an op is cut into steps that fit
// each rank's device scratch, which slice of a step each rank reduces, and the records
// the ranks exchange through the host collectives (per-op header, scratch handle).
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

#include "core/op.hpp"
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

// ---- records exchanged through host all-gathers (raw bytes, fixed layout)

constexpr uint32_t kIpcHeaderMagic = 0x48504943u;  // "CIPH"
constexpr uint32_t kIpcRecordMagic = 0x52504943u;  // "CIPR"
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

constexpr size_t kIpcHandleBytes = 64;  // CUDA_IPC_HANDLE_SIZE
constexpr size_t kIpcErrorBytes = 120;

// One rank's scratch, for the others to open.
struct IpcScratchRecord {
  uint32_t magic = kIpcRecordMagic;
  uint32_t version = kIpcVersion;
  int32_t rank = -1;
  int32_t pid = 0;
  int32_t device = -1;
  int32_t ok = 0;              // 0: allocation or export failed, error says why
  uint64_t process = 0;        // random per process: equal means one address space (pids
                               // alone can repeat across PID namespaces)
  uint64_t bytes = 0;
  uint64_t address = 0;        // for ranks of the same process (threads): no handle needed
  uint8_t handle[kIpcHandleBytes] = {};
  char error[kIpcErrorBytes] = {};  // NUL-terminated
};
static_assert(sizeof(IpcScratchRecord) == 232, "exchanged as raw bytes");

void setRecordError(IpcScratchRecord& r, const std::string& what);
// Throws collRemoteError naming the rank and the field for a malformed record.
void validateRecord(const IpcScratchRecord& r, int expectRank);
// "" when every record is ok; otherwise the first failing rank and its message.
std::string firstRecordFailure(const std::vector<IpcScratchRecord>& all);
// The scratch every rank can use: the smallest one offered.
size_t agreedScratchBytes(const std::vector<IpcScratchRecord>& all);

}  // namespace coll::cuda
