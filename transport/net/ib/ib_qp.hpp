// The verbs objects of one InfiniBand endpoint: the RC queue pairs of its connection,
// spread round-robin over its ports (one port unless COLL_IB_PORTS says more), a
// completion queue per device they are on, and a registered buffer of bounce slots and
// control entries on the first port's device, created and destroyed together.
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
  uint32_t qps = 1;    // per port
  uint32_t ports = 1;  // COLL_IB_PORTS
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
  // Creates the CQs, the QPs (taken to INIT) and the buffer: queue pair i on
  // ports[i % ports.size()] (ports[0]: the one the bounce slots and control go through).
  QpSet(const std::vector<Port>& ports, const Tunables& tun, const QpShape& shape);
  ~QpSet();
  QpSet(const QpSet&) = delete;
  QpSet& operator=(const QpSet&) = delete;

  // This side's addresses for the peer (zcopyMin left 0 for the caller); *ports stays
  // all zero on one port.
  void describe(ConnInfo* info, ConnPorts* ports, uint32_t kind) const;
  // INIT -> RTR -> RTS of every QP against the peer's (queue pair i with the peer's i,
  // on the port the peer names for it). Throws when the peer cannot be reached from
  // this side's port (other link layer) or has another number of QPs.
  void connectTo(const ConnInfo& peer, const PeerPorts& where);

  uint8_t* slot(uint32_t i) const { return buf_ + size_t(i) * shape_.chunk; }
  uint8_t* ctrl(uint32_t i) const { return buf_ + size_t(shape_.slots) * shape_.chunk + size_t(i) * kCtrlBytes; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t chunk() const { return shape_.chunk; }
  uint32_t slots() const { return shape_.slots; }
  uint32_t nqps() const { return shape_.nqps; }
  uint32_t maxInline() const { return maxInline_; }
  const std::string& name() const { return ports_[0].name; }
  const VerbsOps& ops() const { return *ports_[0].dev->ops; }
  // Devices the QPs are on, the first port's first; each has its PD, CQ, registrations.
  uint32_t ndevs() const { return uint32_t(devs_.size()); }
  const std::shared_ptr<Device>& device(uint32_t d = 0) const { return devs_[d]; }
  uint32_t nports() const { return uint32_t(ports_.size()); }
  uint32_t devOfPort(uint32_t p) const { return portDev_[p]; }
  uint32_t portOfQp(uint32_t q) const { return q % nports(); }
  uint32_t devOfQp(uint32_t q) const { return portDev_[portOfQp(q)]; }
  const std::string& portName(uint32_t p) const { return ports_[p].name; }
  // The peer's port that queue pair q talks to (an index into the peer's ports).
  uint32_t peerPortOfQp(uint32_t q) const { return peerQpPort_[q]; }
  // The same before connectTo (0: the peer's first port).
  uint32_t peerPortOfQpOr0(uint32_t q) const { return q < peerQpPort_.size() ? peerQpPort_[q] : 0; }
  uint32_t peerPorts() const { return peerPorts_; }
  ibv_qp* qp(uint32_t i = 0) const { return qps_[i]; }
  ibv_cq* cq(uint32_t d = 0) const { return cqs_[d]; }
  uint64_t token = 0;          // the handle's token (receivers)
  std::string peerName = "?";  // the peer's first port, for messages
  std::vector<std::string> peerPortNames;

 private:
  void createQp(uint32_t i, uint32_t send, uint32_t recv);
  void connectQp(uint32_t i, const ConnInfo& peer, const PortAddr& at);
  void destroy();
  std::vector<Port> ports_;
  std::vector<std::shared_ptr<Device>> devs_;
  std::vector<uint32_t> portDev_;
  Tunables tun_;
  QpShape shape_;
  std::vector<uint32_t> psn_;
  uint32_t maxInline_ = 0;
  uint8_t* buf_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::vector<ibv_cq*> cqs_;
  std::vector<ibv_qp*> qps_;
  std::vector<uint32_t> peerQpPort_;
  uint32_t peerPorts_ = 1;
};

// A random 64-bit value (PSNs, tokens).
uint64_t randomU64();

}  // namespace coll::net::ib
