#include "comm/user_ops.hpp"

#include <climits>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/error.hpp"
#include "base/export.hpp"
#include "comm/handles.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

struct UserOp {
  const collComm* comm = nullptr;
  collDataType_t dtype = collFloat32;
  alignas(8) unsigned char scalar[8] = {};
};

// Op numbers are handed out process-wide and never reused, so that an op of another
// communicator, or one destroyed before, is recognised as such instead of naming
// whatever op took its number later. (Like the handle registry, this table is shared by
// every communicator of the process.)
struct UserOpTable {
  std::mutex mu;
  std::unordered_map<int, UserOp> live;
  std::unordered_map<const collComm*, int> perComm;  // live ops per communicator
  int next = collNumOps;
};

UserOpTable& table() {
  static UserOpTable t;
  return t;
}

// Why `op` is not a live op of `comm` (t.mu held).
[[noreturn]] void refuse(const UserOpTable& t, const collComm* comm, int op) {
  auto it = t.live.find(op);
  if (it != t.live.end() && it->second.comm != comm)
    COLL_THROW(collInvalidUsage, "op ", op, " belongs to another communicator (ops are valid only on the "
               "communicator they were made on)");
  if (op < t.next)
    COLL_THROW(collInvalidUsage, "op ", op, " was destroyed (by collRedOpDestroy, or with its communicator)");
  COLL_THROW(collInvalidArgument, "op ", op, " is neither a built-in collRedOp_t nor one made by "
             "collRedOpCreatePreMulSum");
}

}  // namespace

collRedOp_t createPreMulSum(const collComm* comm, const void* scalar, collDataType_t dt) {
  UserOpTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  int& count = t.perComm[comm];
  if (count >= kMaxUserOpsPerComm)
    COLL_THROW(collInvalidUsage, "the communicator already holds ", count, " reduction operators, the most "
               "it may (destroy unused ones with collRedOpDestroy)");
  if (t.next == INT_MAX) COLL_THROW(collInvalidUsage, "this process has used up every reduction operator number");
  UserOp u;
  u.comm = comm;
  u.dtype = dt;
  memcpy(u.scalar, scalar, typeSize(dt));
  const int op = t.next++;
  t.live.emplace(op, u);
  ++count;
  return static_cast<collRedOp_t>(op);
}

void destroyUserOp(const collComm* comm, collRedOp_t op) {
  const int n = static_cast<int>(op);
  COLL_CHECK_ARG(n >= collNumOps, "op ", n, n >= 0 ? strCat(" (", opName(op), ")") : std::string(),
                 " is a built-in reduction operator; only ops made by collRedOpCreatePreMulSum can be destroyed");
  UserOpTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.live.find(n);
  if (it == t.live.end() || it->second.comm != comm) refuse(t, comm, n);
  t.live.erase(it);
  if (--t.perComm[comm] == 0) t.perComm.erase(comm);
}

void resolveUserOp(const collComm* comm, OpArgs& op) {
  const bool reduces = op.kind == OpKind::AllReduce || op.kind == OpKind::Reduce ||
                       op.kind == OpKind::ReduceScatter;
  const int n = static_cast<int>(op.op);
  if (!reduces || n < collNumOps) return;  // built-in ops, bad values: validateOp's business
  UserOpTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.live.find(n);
  if (it == t.live.end() || it->second.comm != comm) refuse(t, comm, n);
  const UserOp& u = it->second;
  COLL_CHECK_ARG(u.dtype == op.dtype, "op ", n, " was made for datatype ", typeName(u.dtype),
                 ", but the call passes ", typeName(op.dtype), " (", static_cast<int>(op.dtype), ")");
  op.op = collSum;
  op.preMul = true;
  memcpy(op.scalar, u.scalar, sizeof op.scalar);
}

void dropUserOps(const collComm* comm) {
  UserOpTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.perComm.erase(comm) == 0) return;
  for (auto it = t.live.begin(); it != t.live.end();) {
    if (it->second.comm == comm) it = t.live.erase(it);
    else ++it;
  }
}

}  // namespace coll

using namespace coll;

extern "C" {

COLL_EXPORT collResult_t collRedOpCreatePreMulSum(collRedOp_t* op, void* scalar, collDataType_t datatype,
                                                  collScalarResidence_t residence, collComm_t comm) {
  return guarded(comm, "collRedOpCreatePreMulSum", [&] {
    COLL_CHECK_ARG(op, "op is NULL");
    collComm& c = liveComm(comm);
    COLL_CHECK_ARG(scalar, "scalar is NULL");
    COLL_CHECK_ARG(validType(datatype), "datatype ", static_cast<int>(datatype), " is not a valid collDataType_t");
    COLL_CHECK_ARG(residence == collScalarHostImmediate || residence == collScalarDevice, "residence ",
                   static_cast<int>(residence), " is not a valid collScalarResidence_t");
    // A device scalar is read by the reduction at each call; the reductions here run on
    // the host (device buffers are staged), so there is nothing that could read it in
    // stream order yet.
    if (residence == collScalarDevice)
      COLL_THROW(collInvalidUsage, "collScalarDevice is not supported: pass the scalar in host memory with "
                 "collScalarHostImmediate");
    *op = createPreMulSum(&c, scalar, datatype);
  });
}

COLL_EXPORT collResult_t collRedOpDestroy(collRedOp_t op, collComm_t comm) {
  return guarded(comm, "collRedOpDestroy", [&] {
    collComm& c = liveComm(comm);
    destroyUserOp(&c, op);
  });
}

}  // extern "C"
