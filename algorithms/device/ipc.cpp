// The CUDA IPC collectives (ipc_collectives.cpp) as selection sees them: one entry per
// collective they run, named "ipc", so that COLL_ALGO forces them (allreduce:ipc) or,
// naming a host algorithm, the host-staged path instead (allreduce:ring). They take
// device buffers only, as jobs of the communicator's stream executor (IpcEngine, chosen
// at enqueue by Selector::deviceAlgorithm), never a host-buffer call: supports() is false
// there and the host cost model does not price them. CUDA builds only.
#include <limits>

#include "algorithms/algorithm.hpp"
#include "base/error.hpp"
#include "cost/context.hpp"

namespace coll {
namespace {

class IpcCollective final : public Algorithm {
 public:
  explicit IpcCollective(OpKind kind) : kind_(kind) {}
  const char* name() const override { return "ipc"; }
  const char* description() const override {
    return "device buffers of one host: peers' device scratch over CUDA IPC, copy engine and reduction kernels";
  }
  OpKind kind() const override { return kind_; }
  bool onDevice() const override { return true; }
  bool supports(const CostContext&, const OpArgs&) const override { return false; }
  double estimate(const CostContext&, size_t) const override { return std::numeric_limits<double>::infinity(); }
  void run(Team&, const OpArgs&) const override {
    COLL_THROW(collInternalError, "the CUDA IPC ", opKindName(kind_), " was given host buffers");
  }

 private:
  OpKind kind_;
};

}  // namespace

const Algorithm& ipcAllReduce() {
  static const IpcCollective algo(OpKind::AllReduce);
  return algo;
}
const Algorithm& ipcReduce() {
  static const IpcCollective algo(OpKind::Reduce);
  return algo;
}
const Algorithm& ipcReduceScatter() {
  static const IpcCollective algo(OpKind::ReduceScatter);
  return algo;
}
const Algorithm& ipcAllGather() {
  static const IpcCollective algo(OpKind::AllGather);
  return algo;
}
const Algorithm& ipcBroadcast() {
  static const IpcCollective algo(OpKind::Broadcast);
  return algo;
}

}  // namespace coll
