// Inside the fake verbs fabric: the objects behind the verbs handles it gives out.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include "fake_verbs.hpp"

namespace coll::net::ib::fake {

struct DevObj {
  ibv_device dev{};
  FakeDevice spec;
};
struct CtxObj {
  ibv_context ctx{};
  DevObj* dev = nullptr;
};
struct PdObj {
  ibv_pd pd{};
  CtxObj* ctx = nullptr;
};
struct MrObj {
  ibv_mr mr{};
  PdObj* pd = nullptr;
  int access = 0;
  std::vector<uint64_t> pages;  // pinned: the page generations at registration (not ODP)
};
struct CqObj {
  ibv_cq cq{};
  CtxObj* ctx = nullptr;
  std::deque<ibv_wc> wcs;
  bool overrun = false;
};
struct RecvWr {
  uint64_t wrId;
  std::vector<ibv_sge> sges;
};
struct SendWr {
  uint32_t qpn;
  uint64_t wrId;
  ibv_wr_opcode opcode;
  uint32_t imm;  // network order, as posted
  uint64_t remoteAddr = 0;  // RDMA writes
  uint32_t rkey = 0;
  bool signaled;
  bool isInline;
  std::vector<uint8_t> inlineData;
  std::vector<ibv_sge> sges;
  ibv_wc_status forced = IBV_WC_SUCCESS;
};
struct QpObj {
  ibv_qp qp{};
  PdObj* pd = nullptr;
  CqObj* scq = nullptr;
  CqObj* rcq = nullptr;
  ibv_qp_cap cap{};
  bool sigAll = false;
  int port = 0;
  int access = 0;      // qp_access_flags from INIT
  ibv_qp_attr attr{};  // what RTR and RTS set
  std::deque<RecvWr> rq;
  int sqOut = 0;  // sends posted, not yet completed
};

struct FabricState {
  std::mutex mu;
  std::vector<std::unique_ptr<DevObj>> devs;
  std::map<const void*, std::unique_ptr<CtxObj>> ctxs;
  std::map<const void*, std::unique_ptr<PdObj>> pds;
  std::map<const void*, std::unique_ptr<MrObj>> mrs;
  std::map<const void*, std::unique_ptr<CqObj>> cqs;
  std::map<const void*, std::unique_ptr<QpObj>> qps;
  std::map<uint32_t, QpObj*> byQpn;
  std::deque<SendWr> pending;  // posted SENDs not delivered yet, in post order
  bool deferred = true;
  ibv_wc_status failNext = IBV_WC_SUCCESS;
  uint32_t nextKey = 0x1000;
  uint32_t nextQpn = 0x100;
  std::vector<uint32_t> qpnOrder;
  std::vector<std::string> misuse;
  int errorWcs = 0;
  std::optional<std::mt19937_64> shuffle;
  std::map<uintptr_t, uint64_t> pageGen;  // page address -> generation (absent: 0)
  bool framesReadable = true;
  size_t pinLimit = 0, pinned = 0;
  int64_t shiftNext = 0;
  int regs = 0;
  FakeFabric::Traffic traffic;
  std::map<std::pair<std::string, int>, uint64_t> portBytes;  // (device, port) -> bytes sent from it
  void countFrom(const QpObj* src, size_t bytes);
  VerbsOps ops{};

  // Helpers, called with mu held (fake_qp.cpp).
  const FakePort* portOf(const QpObj* q) const;
  MrObj* findMr(uint32_t lkey);
  MrObj* findRemoteMr(uint32_t rkey, const PdObj* pd);
  // Memory through an MR as the NIC sees it (fake_mem.cpp): pages replaced since a
  // pinned MR was made are not the program's any more.
  uint64_t generation(uintptr_t page) const;
  void readThrough(const MrObj* m, uintptr_t addr, size_t len, std::vector<uint8_t>* out) const;
  void writeThrough(const MrObj* m, uintptr_t addr, const uint8_t* src, size_t len);
  void push(CqObj* cq, const ibv_wc& wc);
  void toError(QpObj* q);
  void deliver(SendWr& w);
  void deliverWrite(SendWr& w, QpObj* src, std::vector<uint8_t>& data);
  void deliverPending();
  bool peerOk(const QpObj* src, const QpObj* dst) const;
};

// The fabric behind the function table (set by FakeFabric).
FabricState* current();
// Fills st->ops with the QP, post and poll calls (fake_qp.cpp), and the MR, page and
// extended-query calls (fake_mem.cpp).
void fillQpOps(VerbsOps* ops);
void fillMemOps(VerbsOps* ops);
constexpr size_t kFakePage = 4096;

}  // namespace coll::net::ib::fake
