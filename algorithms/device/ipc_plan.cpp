#include "algorithms/device/ipc_plan.hpp"

#include <cstring>

#include "base/error.hpp"
#include "base/types.hpp"

namespace coll::cuda {
namespace {

size_t alignUp(size_t x) { return (x + kIpcAlign - 1) / kIpcAlign * kIpcAlign; }

// Fills the layout for steps of `elems` elements; returns the scratch bytes it needs,
// or SIZE_MAX when that overflows.
size_t layoutFor(OpKind kind, size_t elems, size_t elemSize, int nranks, IpcPlan& p) {
  const size_t n = static_cast<size_t>(nranks);
  if (elems > SIZE_MAX / elemSize / (2 * n + 2)) return SIZE_MAX;
  p = IpcPlan{};
  p.stepElems = elems;
  switch (kind) {
    case OpKind::AllReduce:
    case OpKind::Reduce: {
      // Input chunk, then a slot per rank for the pieces of my slice, then my slice.
      p.inSlots = 1;
      p.inSlotBytes = alignUp(elems * elemSize);
      p.slotBytes = alignUp((elems + n - 1) / n * elemSize);
      p.gatherOffset = p.inSlotBytes;
      p.outOffset = p.gatherOffset + n * p.slotBytes;
      p.scratchUsed = p.outOffset + p.slotBytes;
      break;
    }
    case OpKind::ReduceScatter: {
      // My input for every rank's block, then a slot per rank for the pieces of mine;
      // the result goes straight to the receive buffer.
      p.inSlots = n;
      p.inSlotBytes = alignUp(elems * elemSize);
      p.slotBytes = p.inSlotBytes;
      p.gatherOffset = n * p.inSlotBytes;
      p.outOffset = p.gatherOffset + n * p.slotBytes;
      p.scratchUsed = p.outOffset;
      break;
    }
    case OpKind::AllGather:
    case OpKind::Broadcast:
      // Only the input: peers copy it straight into their receive buffers.
      p.inSlots = 1;
      p.inSlotBytes = alignUp(elems * elemSize);
      p.gatherOffset = p.outOffset = p.scratchUsed = p.inSlotBytes;
      break;
    default:
      COLL_THROW(collInvalidArgument, "the CUDA IPC path does not run ", opKindName(kind));
  }
  return p.scratchUsed;
}

}  // namespace

bool ipcCommEligible(int nranks, int nhosts, bool enabled) { return enabled && nranks > 1 && nhosts == 1; }

bool ipcServes(OpKind kind) {
  return kind == OpKind::AllReduce || kind == OpKind::Broadcast || kind == OpKind::Reduce ||
         kind == OpKind::AllGather || kind == OpKind::ReduceScatter;
}

bool ipcBuffersOnDevice(const StreamOpSpec& s) {
  return (s.sendBytes == 0 || s.sendOnDevice) && (s.recvBytes == 0 || s.recvOnDevice) &&
         (s.sendBytes > 0 || s.recvBytes > 0);
}

ElemRange sliceOf(size_t n, int parts, int i) {
  COLL_CHECK_ARG(parts > 0 && i >= 0 && i < parts, "slice ", i, " of ", parts);
  const size_t p = static_cast<size_t>(parts), k = static_cast<size_t>(i);
  const size_t base = n / p, extra = n % p;
  return {k * base + (k < extra ? k : extra), base + (k < extra ? 1 : 0)};
}

ElemRange IpcPlan::step(size_t s, size_t count) const {
  const size_t off = s * stepElems;
  return {off, count - off < stepElems ? count - off : stepElems};
}

IpcPlan planIpc(OpKind kind, size_t count, size_t elemSize, int nranks, size_t scratchBytes) {
  COLL_CHECK_ARG(elemSize > 0 && nranks > 0, "IPC plan: elemSize ", elemSize, ", nranks ", nranks);
  IpcPlan p;
  if (count == 0) {
    layoutFor(kind, 0, elemSize, nranks, p);  // checks the kind
    p.stepElems = 0;
    p.steps = 0;
    return p;
  }
  if (layoutFor(kind, 1, elemSize, nranks, p) > scratchBytes)
    COLL_THROW(collInvalidArgument, "COLL_CUDA_IPC_BUFFER (", scratchBytes, " bytes) holds not one ",
               elemSize, "-byte element of ", opKindName(kind), " over ", nranks, " ranks (needs ",
               p.scratchUsed, ")");
  // The largest step that fits (the layout grows with the step).
  size_t lo = 1, hi = count;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo + 1) / 2;
    if (layoutFor(kind, mid, elemSize, nranks, p) <= scratchBytes) lo = mid;
    else hi = mid - 1;
  }
  size_t elems = lo;
  // Steps start on aligned bytes when there are several.
  const size_t unit = kIpcAlign / elemSize > 0 ? kIpcAlign / elemSize : 1;
  if (elems < count && elems > unit) elems = elems / unit * unit;
  layoutFor(kind, elems, elemSize, nranks, p);
  p.steps = (count + elems - 1) / elems;
  return p;
}

namespace {
// The header's reduction: collNumOps stands for every pre-multiplied sum (as in the call
// signatures, the scalar and the op's number may differ between ranks).
int32_t headerOp(const OpArgs& op) { return static_cast<int32_t>(op.preMul ? collNumOps : op.op); }
const char* headerOpName(int32_t op) {
  return op == collNumOps ? "premulsum" : opName(static_cast<collRedOp_t>(op));
}
}  // namespace

IpcOpHeader makeHeader(const OpArgs& op, int rank, bool ipc) {
  IpcOpHeader h;
  h.rank = rank;
  h.kind = static_cast<int32_t>(op.kind);
  h.dtype = static_cast<int32_t>(op.dtype);
  h.op = headerOp(op);
  h.root = op.root;
  h.ipc = ipc ? 1 : 0;
  h.count = op.count;
  return h;
}

bool agreeHeaders(const std::vector<IpcOpHeader>& all, const OpArgs& op) {
  bool ipc = true;
  const bool reduces = op.kind == OpKind::AllReduce || op.kind == OpKind::Reduce ||
                       op.kind == OpKind::ReduceScatter;
  const bool rooted = op.kind == OpKind::Broadcast || op.kind == OpKind::Reduce;
  for (size_t r = 0; r < all.size(); ++r) {
    const IpcOpHeader& h = all[r];
    if (h.magic != kIpcHeaderMagic || h.version != kIpcVersion || h.rank != static_cast<int32_t>(r) ||
        (h.ipc != 0 && h.ipc != 1))
      COLL_THROW(collRemoteError, "rank ", r, " sent a malformed device-collective header (magic ",
                 h.magic, ", version ", h.version, ", rank ", h.rank, "): did it call another collective?");
    if (h.kind != static_cast<int32_t>(op.kind))
      COLL_THROW(collInvalidUsage, "rank ", r, " called ", opKindName(static_cast<OpKind>(h.kind)),
                 " where this rank called ", opKindName(op.kind));
    if (h.count != op.count)
      COLL_THROW(collInvalidUsage, opKindName(op.kind), ": rank ", r, " passed count ", h.count,
                 ", this rank ", op.count);
    if (h.dtype != static_cast<int32_t>(op.dtype))
      COLL_THROW(collInvalidUsage, opKindName(op.kind), ": rank ", r, " passed datatype ",
                 typeName(static_cast<collDataType_t>(h.dtype)), ", this rank ", typeName(op.dtype));
    if (reduces && h.op != headerOp(op))
      COLL_THROW(collInvalidUsage, opKindName(op.kind), ": rank ", r, " passed op ", headerOpName(h.op),
                 ", this rank ", headerOpName(headerOp(op)));
    if (rooted && h.root != op.root)
      COLL_THROW(collInvalidUsage, opKindName(op.kind), ": rank ", r, " passed root ", h.root,
                 ", this rank ", op.root);
    ipc = ipc && h.ipc == 1;
  }
  return ipc;
}

}  // namespace coll::cuda
