// The verbs objects of one InfiniBand endpoint: a completion queue, the RC queue pairs
// of its connection (all on that CQ) and a registered buffer of bounce slots and control
// entries, created and destroyed together.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/net/ib/ib_devices.hpp"
#include "transport/net/ib/ib_wire.hpp"

namespace coll::net::ib {

// Read from the environment at init().
struct Tunables {
  uint32_t chunk = 128 << 10;
  uint32_t slots = 16;
  uint32_t qps = 1;
  bool zcopy = true;
  uint64_t zcopyMin = 32 << 10;
  bool regCache = true;
  uint64_t regCacheMax = uint64_t(4) << 30;
  int gidIndex = -1;
  std::string hca;
  uint8_t timeout = 20;  // 4.096 us * 2^timeout before a packet is resent
  uint8_t retry = 7;
  uint8_t sl = 0;
  uint8_t tc = 0;
};

struct QpShape {
  uint32_t nqps = 1;
  uint32_t chunk = 0, slots = 0;  // bounce slots
  uint32_t ctrl = 0;              // control entries of kCtrlBytes
  uint32_t send0 = 1, recv0 = 1;  // most work requests outstanding on QP 0's queues
  uint32_t sendN = 1, recvN = 1;  // on each of the others'
  bool remoteWrite = false;       // the peer may RDMA-write into memory registered here
};

class QpSet {
 public:
  // Creates the CQ, the QPs (taken to INIT) and the buffer.
  QpSet(const Port& port, const Tunables& tun, const QpShape& shape);
  ~QpSet();
  QpSet(const QpSet&) = delete;
  QpSet& operator=(const QpSet&) = delete;

  // This side's addresses for the peer (zcopyMin left 0 for the caller).
  void describe(ConnInfo* info, uint32_t kind) const;
  // INIT -> RTR -> RTS of every QP against the peer's. Throws when the peer cannot be
  // reached from this port (other link layer) or has another number of QPs.
  void connectTo(const ConnInfo& peer);

  uint8_t* slot(uint32_t i) const { return buf_ + size_t(i) * shape_.chunk; }
  uint8_t* ctrl(uint32_t i) const { return buf_ + size_t(shape_.slots) * shape_.chunk + size_t(i) * kCtrlBytes; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t chunk() const { return shape_.chunk; }
  uint32_t slots() const { return shape_.slots; }
  uint32_t nqps() const { return shape_.nqps; }
  uint32_t maxInline() const { return maxInline_; }
  const std::string& name() const { return port_.name; }
  const VerbsOps& ops() const { return *port_.dev->ops; }
  const std::shared_ptr<Device>& device() const { return port_.dev; }
  ibv_qp* qp(uint32_t i = 0) const { return qps_[i]; }
  ibv_cq* cq() const { return cq_; }
  uint64_t token = 0;          // the handle's token (receivers)
  std::string peerName = "?";  // the peer's port, for messages

 private:
  void createQp(uint32_t send, uint32_t recv);
  void connectQp(uint32_t i, const ConnInfo& peer);
  void destroy();
  Port port_;
  Tunables tun_;
  QpShape shape_;
  std::vector<uint32_t> psn_;
  uint32_t maxInline_ = 0;
  uint8_t* buf_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;
};

// A random 64-bit value (PSNs, tokens).
uint64_t randomU64();

}  // namespace coll::net::ib
