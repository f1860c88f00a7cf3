#include "cuda/op_spec.hpp"

#include "base/error.hpp"
#include "base/types.hpp"

namespace coll::cuda {

StreamOpSpec specForOp(const OpArgs& op, int nranks, int rank, bool sendOnDevice,
                       bool recvOnDevice, int device) {
  COLL_CHECK_ARG(validType(op.dtype), "datatype ", static_cast<int>(op.dtype), " is not a valid collDataType_t");
  COLL_CHECK_ARG(nranks >= 1 && rank >= 0 && rank < nranks, "rank ", rank, " of ", nranks);
  const size_t es = typeSize(op.dtype);
  const size_t one = op.count * es;
  const size_t all = one * static_cast<size_t>(nranks);
  size_t sendBytes = 0, recvBytes = 0;
  bool elementwise = false;
  switch (op.kind) {
    case OpKind::AllReduce: sendBytes = recvBytes = one; elementwise = true; break;
    case OpKind::Broadcast: sendBytes = rank == op.root ? one : 0; recvBytes = one; elementwise = true; break;
    case OpKind::Reduce: sendBytes = one; recvBytes = rank == op.root ? one : 0; elementwise = true; break;
    case OpKind::AllGather: sendBytes = one; recvBytes = all; break;
    case OpKind::ReduceScatter: sendBytes = all; recvBytes = one; break;
    case OpKind::AllToAll: sendBytes = recvBytes = all; break;
    case OpKind::Gather: sendBytes = one; recvBytes = rank == op.root ? all : 0; break;
    case OpKind::Scatter: sendBytes = rank == op.root ? all : 0; recvBytes = one; break;
    case OpKind::Send: sendBytes = one; elementwise = true; break;
    case OpKind::Recv: recvBytes = one; elementwise = true; break;
    case OpKind::Barrier: break;
  }
  StreamOpSpec s;
  s.send = op.sendbuf;
  s.sendBytes = sendBytes;
  s.sendOnDevice = sendOnDevice;
  s.recv = op.recvbuf;
  s.recvBytes = recvBytes;
  s.recvOnDevice = recvOnDevice;
  s.count = op.count;
  s.elemSize = es;
  s.elementwise = elementwise;
  s.device = device;
  return s;
}

StreamOpSpec describeOp(StreamBackend& cuda, const OpArgs& op, int nranks, int rank) {
  const int sendDevice = cuda.deviceOf(op.sendbuf);
  const int recvDevice = cuda.deviceOf(op.recvbuf);
  COLL_CHECK_ARG(sendDevice < 0 || recvDevice < 0 || sendDevice == recvDevice, "sendbuff is on device ",
                 sendDevice, " and recvbuff on device ", recvDevice, "; both must be on one device");
  const int device = sendDevice >= 0 ? sendDevice : recvDevice >= 0 ? recvDevice : cuda.currentDevice();
  return specForOp(op, nranks, rank, sendDevice >= 0, recvDevice >= 0, device);
}

bool usesDeviceMemory(StreamBackend& cuda, const OpArgs& op) {
  return cuda.deviceOf(op.sendbuf) >= 0 || cuda.deviceOf(op.recvbuf) >= 0;
}

}  // namespace coll::cuda
