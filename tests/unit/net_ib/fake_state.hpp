// Inside the fake verbs fabric: the objects behind the verbs handles it gives out.
#pragma once

#include <deque>
#include <map>
#include <mutex>
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
  VerbsOps ops{};

  // Helpers, called with mu held (fake_qp.cpp).
  const FakePort* portOf(const QpObj* q) const;
  MrObj* findMr(uint32_t lkey);
  void push(CqObj* cq, const ibv_wc& wc);
  void toError(QpObj* q);
  void deliver(SendWr& w);
  void deliverPending();
};

// The fabric behind the function table (set by FakeFabric).
FabricState* current();
// Fills st->ops with the QP, post and poll calls (fake_qp.cpp).
void fillQpOps(VerbsOps* ops);

}  // namespace coll::net::ib::fake
