// The verbs objects of one InfiniBand endpoint: a completion queue, an RC queue pair and
// a registered buffer of bounce slots, created and destroyed together.
#pragma once

#include <cstdint>
#include <memory>

#include "transport/net/ib/ib_devices.hpp"
#include "transport/net/ib/ib_wire.hpp"

namespace coll::net::ib {

// Read from the environment at init().
struct Tunables {
  uint32_t chunk = 128 << 10;
  uint32_t slots = 16;
  int gidIndex = -1;
  std::string hca;
  uint8_t timeout = 20;  // 4.096 us * 2^timeout before a packet is resent
  uint8_t retry = 7;
  uint8_t sl = 0;
  uint8_t tc = 0;
};

class QpSet {
 public:
  // Creates the CQ, the QP (taken to INIT) and the slot buffer. sendDepth / recvDepth:
  // most work requests outstanding on each queue.
  QpSet(const Port& port, const Tunables& tun, uint32_t chunk, uint32_t slots,
        uint32_t sendDepth, uint32_t recvDepth);
  ~QpSet();
  QpSet(const QpSet&) = delete;
  QpSet& operator=(const QpSet&) = delete;

  // This side's address for the peer.
  void describe(ConnInfo* info, uint32_t kind) const;
  // INIT -> RTR -> RTS against the peer's address. Throws when the peer cannot be
  // reached from this port (other link layer).
  void connectTo(const ConnInfo& peer);

  uint8_t* slot(uint32_t i) const { return buf_ + size_t(i) * chunk_; }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t chunk() const { return chunk_; }
  uint32_t slots() const { return slots_; }
  uint32_t maxInline() const { return maxInline_; }
  const std::string& name() const { return port_.name; }
  const VerbsOps& ops() const { return *port_.dev->ops; }
  ibv_qp* qp() const { return qp_; }
  ibv_cq* cq() const { return cq_; }
  uint64_t token = 0;         // the handle's token (receivers)
  std::string peerName = "?"; // the peer's port, for messages

 private:
  void destroy();
  Port port_;
  Tunables tun_;
  uint32_t chunk_, slots_;
  uint32_t psn_ = 0;
  uint32_t maxInline_ = 0;
  uint8_t* buf_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
};

// A random 64-bit value (PSNs, tokens).
uint64_t randomU64();

}  // namespace coll::net::ib
