// An in-process verbs fabric for the InfiniBand backend's tests: fake devices and ports,
// PDs, MRs with keys, ranges and access rights, CQs and RC queue pairs with the verbs
// state machine. SENDs and RDMA WRITEs (with immediate) are checked like hardware would
// (keys, ranges, rights, states, addresses, a RECV posted at the target); SENDs copy into
// the target's oldest RECV, writes into the remote region; a broken protocol turns into
// the error completion a NIC would give. Registrations pin pages as the kernel does: the
// fabric keeps its own page table, and an MR made before FakeFabric::replacePages() of
// its range goes on naming the old pages (the stale-registration bug), unless it was
// registered on demand (ODP) on a device that has it.
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
  bool odp = false;  // on-demand paging for RC sends, receives and writes
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
  // Deferred delivery in a random order across QPs (each QP's own order kept, as RC
  // guarantees), a random part of what is pending per poll: completions of different
  // QPs then come in any order.
  void setShuffle(uint64_t seed);
  // The kernel gave [addr, addr + len) other pages (a free and a reuse of the address,
  // an munmap and mmap): MRs registered before, unless on demand, still name the old
  // ones. Writes through them are lost, reads return 0xDB bytes.
  void replacePages(const void* addr, size_t len);
  // Page frames readable by the process (as with CAP_SYS_ADMIN); false: hidden (EPERM).
  void setFramesReadable(bool readable);
  // Registrations (other than on demand) fail with ENOMEM beyond this many bytes pinned
  // in all (0: no limit), like RLIMIT_MEMLOCK.
  void setPinLimit(size_t bytes);
  // The next RDMA write's remote address is moved by delta (a corrupt region).
  void shiftNextWrite(int64_t delta);
  // The next SEND to be delivered completes with `status` instead (and, as on a NIC,
  // its QP goes to ERROR and flushes the rest).
  void failNextSend(ibv_wc_status status);
  // A port's link goes to `state` (IBV_PORT_DOWN: a cable pulled, a NIC failed): from
  // then on nothing reaches the port or leaves it, so SENDs and writes over it complete
  // with IBV_WC_RETRY_EXC_ERR once retries run out, as on a real fabric.
  void setPortState(const std::string& dev, int port, ibv_port_state state);
  // Moves a QP to ERROR: every posted work request completes with IBV_WC_WR_FLUSH_ERR.
  void breakQp(uint32_t qpn);
  // QP numbers alive, in creation order.
  std::vector<uint32_t> qpns() const;

  struct Counts {
    int contexts = 0, pds = 0, mrs = 0, cqs = 0, qps = 0;
  };
  Counts live() const;
  // What the NICs moved: payload bytes gathered for SENDs and for RDMA writes.
  struct Traffic {
    uint64_t sends = 0, sendBytes = 0, writes = 0, writeBytes = 0, writesWithImm = 0;
  };
  Traffic traffic() const;
  // Payload bytes that left port `port` (from 1) of device `dev`: SENDs and RDMA writes
  // delivered from QPs on it.
  uint64_t portBytes(const std::string& dev, int port) const;
  int registrations() const;  // reg_mr calls that succeeded
  size_t pinned() const;      // bytes registered other than on demand
  // Misuses seen (destroying a PD with MRs on it, polling an unknown CQ, ...).
  std::vector<std::string> misuse() const;
  // Work completions with an error status delivered so far.
  int errorCompletions() const;

 private:
  std::unique_ptr<FabricState> st_;
};

}  // namespace coll::net::ib::fake
