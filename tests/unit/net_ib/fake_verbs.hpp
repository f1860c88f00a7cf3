// An in-process verbs fabric for the InfiniBand backend's tests: fake devices and ports,
// PDs, MRs with keys and ranges, CQs and RC queue pairs with the verbs state machine.
// SENDs are checked like hardware would (keys, ranges, states, addresses, a RECV posted
// at the target) and copy into the target's oldest RECV; a broken protocol turns into
// the error completion a NIC would give.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/net/ib/verbs_ops.hpp"

namespace coll::net::ib::fake {

struct FakeGid {
  ibv_gid gid{};
  int type = IBV_GID_TYPE_ROCE_V2;
};

struct FakePort {
  ibv_port_state state = IBV_PORT_ACTIVE;
  uint8_t linkLayer = IBV_LINK_LAYER_INFINIBAND;
  uint16_t lid = 0;  // 0: the fabric assigns one (InfiniBand)
  ibv_mtu mtu = IBV_MTU_4096;
  uint8_t speed = 32, width = 2;  // EDR, 4x: 100 Gb/s
  std::vector<FakeGid> gids;      // the GID table (all-zero entries are empty)
  bool gidEx = true;              // ibv_query_gid_ex works (else only ibv_query_gid)
};

struct FakeDevice {
  std::string name;
  std::vector<FakePort> ports;
  bool openFails = false;
};

// An InfiniBand device with `ports` ACTIVE ports.
FakeDevice ibDevice(const std::string& name, int ports = 1);
// A RoCE device with one ACTIVE port whose GID table is `gids`.
FakeDevice roceDevice(const std::string& name, std::vector<FakeGid> gids);
FakeGid ipv4Gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d, int type = IBV_GID_TYPE_ROCE_V2);
FakeGid linkLocalGid(uint64_t iid, int type = IBV_GID_TYPE_ROCE_V2);

struct FabricState;

class FakeFabric {
 public:
  // Becomes the fabric behind ops() (one at a time per process).
  explicit FakeFabric(std::vector<FakeDevice> devices);
  ~FakeFabric();
  FakeFabric(const FakeFabric&) = delete;
  FakeFabric& operator=(const FakeFabric&) = delete;

  // The verbs table that routes to this fabric.
  const VerbsOps* ops() const;

  // SENDs are delivered at the next poll of any CQ (true) or when posted (false).
  void setDeferred(bool deferred);
  // The next SEND to be delivered completes with `status` instead (and, as on a NIC,
  // its QP goes to ERROR and flushes the rest).
  void failNextSend(ibv_wc_status status);
  // Moves a QP to ERROR: every posted work request completes with IBV_WC_WR_FLUSH_ERR.
  void breakQp(uint32_t qpn);
  // QP numbers alive, in creation order.
  std::vector<uint32_t> qpns() const;

  struct Counts {
    int contexts = 0, pds = 0, mrs = 0, cqs = 0, qps = 0;
  };
  Counts live() const;
  // Misuses seen (destroying a PD with MRs on it, polling an unknown CQ, ...).
  std::vector<std::string> misuse() const;
  // Work completions with an error status delivered so far.
  int errorCompletions() const;

 private:
  std::unique_ptr<FabricState> st_;
};

}  // namespace coll::net::ib::fake
