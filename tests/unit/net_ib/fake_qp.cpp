// The fake fabric's RC queue pairs: the state machine, posting, delivery of SENDs into
// the target's receives and of RDMA writes into its regions, completions and errors
// (flushes) as a NIC would produce them.
#include <cerrno>
#include <cstring>
#include <set>

#include "fake_state.hpp"

namespace coll::net::ib::fake {
namespace {

constexpr uint32_t kMaxInline = 256;
constexpr uint32_t kMaxWr = 16384;

QpObj* qpOf(FabricState* s, ibv_qp* qp) {
  auto it = s->qps.find(qp);
  if (it == s->qps.end()) {
    s->misuse.push_back("a call on an unknown QP");
    return nullptr;
  }
  return it->second.get();
}

ibv_wc makeWc(uint64_t wrId, ibv_wc_status st, ibv_wc_opcode op, uint32_t qpn) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = st;
  wc.opcode = op;
  wc.qp_num = qpn;
  return wc;
}

// The MR range [addr, addr+len) must lie in, with that key, on the QP's PD.
bool sgeOk(FabricState* s, const ibv_sge& g, PdObj* pd, bool write) {
  MrObj* m = s->findMr(g.lkey);
  if (!m || m->pd != pd) return false;
  if (write && !(m->access & IBV_ACCESS_LOCAL_WRITE)) return false;
  auto lo = reinterpret_cast<uintptr_t>(m->mr.addr);
  return g.addr >= lo && g.addr + g.length <= lo + m->mr.length && g.addr + g.length >= g.addr;
}

ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* a) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  auto pit = s->pds.find(pd);
  if (pit == s->pds.end() || !a || a->qp_type != IBV_QPT_RC || !s->cqs.count(a->send_cq) ||
      !s->cqs.count(a->recv_cq) || a->cap.max_send_wr > kMaxWr || a->cap.max_recv_wr > kMaxWr ||
      a->cap.max_inline_data > kMaxInline || a->srq) {
    errno = EINVAL;
    return nullptr;
  }
  // A QP and its CQs belong to one device context, as on real hardware.
  if (s->cqs[a->send_cq]->ctx != pit->second->ctx || s->cqs[a->recv_cq]->ctx != pit->second->ctx) {
    s->misuse.push_back("create_qp with a CQ of another device");
    errno = EINVAL;
    return nullptr;
  }
  auto q = std::make_unique<QpObj>();
  q->pd = pit->second.get();
  q->scq = s->cqs[a->send_cq].get();
  q->rcq = s->cqs[a->recv_cq].get();
  q->cap = a->cap;
  q->sigAll = a->sq_sig_all;
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = a->send_cq;
  q->qp.recv_cq = a->recv_cq;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_num = s->nextQpn++;
  s->byQpn[q->qp.qp_num] = q.get();
  s->qpnOrder.push_back(q->qp.qp_num);
  ibv_qp* p = &q->qp;
  s->qps[p] = std::move(q);
  return p;
}

bool has(int mask, int need) { return (mask & need) == need; }

int modifyQp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  QpObj* q = qpOf(s, qp);
  if (!q || !(mask & IBV_QP_STATE)) return EINVAL;
  const ibv_qp_state cur = q->qp.state, next = a->qp_state;
  if (next == IBV_QPS_ERR) {
    s->toError(q);
    return 0;
  }
  if (next == IBV_QPS_RESET) {
    q->rq.clear();
    q->qp.state = IBV_QPS_RESET;
    return 0;
  }
  if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
    if (!has(mask, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return EINVAL;
    auto* ctx = s->ctxs[qp->context].get();
    if (a->port_num < 1 || a->port_num > ctx->dev->spec.ports.size()) return EINVAL;
    q->port = a->port_num;
    q->access = a->qp_access_flags;
  } else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
    if (!has(mask, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return EINVAL;
    const FakePort* p = s->portOf(q);
    if (a->path_mtu > p->mtu || a->ah_attr.port_num != q->port) return EINVAL;
    if (p->linkLayer == IBV_LINK_LAYER_ETHERNET) {
      // RoCE has no LIDs: the address is the GID, from a source GID that must exist.
      const auto& g = a->ah_attr.grh;
      if (!a->ah_attr.is_global || g.sgid_index >= p->gids.size()) return EINVAL;
      bool zero = true;
      for (uint8_t b : p->gids[g.sgid_index].gid.raw) zero = zero && b == 0;
      if (zero) return EINVAL;
    } else if (a->ah_attr.dlid == 0) {
      return EINVAL;
    }
    q->attr.ah_attr = a->ah_attr;
    q->attr.path_mtu = a->path_mtu;
    q->attr.dest_qp_num = a->dest_qp_num;
    q->attr.rq_psn = a->rq_psn;
  } else if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
    if (!has(mask, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                       IBV_QP_MAX_QP_RD_ATOMIC))
      return EINVAL;
    q->attr.sq_psn = a->sq_psn;
  } else {
    return EINVAL;
  }
  q->qp.state = next;
  return 0;
}

int destroyQp(ibv_qp* qp) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  QpObj* q = qpOf(s, qp);
  if (!q) return EINVAL;
  const uint32_t qpn = q->qp.qp_num;
  std::erase_if(s->pending, [&](const SendWr& w) { return w.qpn == qpn; });
  s->byQpn.erase(qpn);
  std::erase(s->qpnOrder, qpn);
  s->qps.erase(qp);
  return 0;
}

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  QpObj* q = qpOf(s, qp);
  if (!q) return EINVAL;
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_ERR) return EINVAL;
    const bool write = wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM && !write) return EINVAL;
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > q->cap.max_send_sge) return EINVAL;
    if (q->sqOut >= int(q->cap.max_send_wr)) return ENOMEM;
    if (write && (wr->send_flags & IBV_SEND_INLINE)) return EINVAL;  // not used by the backend
    SendWr w{q->qp.qp_num, wr->wr_id, wr->opcode, wr->imm_data, 0, 0,
             q->sigAll || (wr->send_flags & IBV_SEND_SIGNALED), false, {}, {}, IBV_WC_SUCCESS};
    if (write) {
      w.remoteAddr = wr->wr.rdma.remote_addr;
      w.rkey = wr->wr.rdma.rkey;
    }
    w.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
    if (wr->send_flags & IBV_SEND_INLINE) {
      // Inline data is copied now; the keys are not looked at.
      size_t total = 0;
      for (auto& g : w.sges) total += g.length;
      if (total > q->cap.max_inline_data) return EINVAL;
      w.isInline = true;
      for (auto& g : w.sges) {
        auto* p = reinterpret_cast<const uint8_t*>(g.addr);
        w.inlineData.insert(w.inlineData.end(), p, p + g.length);
      }
    }
    if (q->qp.state == IBV_QPS_ERR) {
      s->push(q->scq, makeWc(w.wrId, IBV_WC_WR_FLUSH_ERR, write ? IBV_WC_RDMA_WRITE : IBV_WC_SEND, q->qp.qp_num));
      continue;
    }
    q->sqOut++;
    s->pending.push_back(std::move(w));
  }
  *bad = nullptr;
  if (!s->deferred) s->deliverPending();
  return 0;
}

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  QpObj* q = qpOf(s, qp);
  if (!q) return EINVAL;
  for (; wr; wr = wr->next) {
    *bad = wr;
    if (q->qp.state == IBV_QPS_RESET) return EINVAL;
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > q->cap.max_recv_sge) return EINVAL;
    if (q->qp.state == IBV_QPS_ERR) {
      s->push(q->rcq, makeWc(wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, q->qp.qp_num));
      continue;
    }
    if (q->rq.size() >= q->cap.max_recv_wr) return ENOMEM;
    q->rq.push_back({wr->wr_id, std::vector<ibv_sge>(wr->sg_list, wr->sg_list + wr->num_sge)});
  }
  *bad = nullptr;
  return 0;
}

int pollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  auto it = s->cqs.find(cq);
  if (it == s->cqs.end()) {
    s->misuse.push_back("poll_cq of an unknown CQ");
    return -1;
  }
  s->deliverPending();
  CqObj* c = it->second.get();
  if (c->overrun) return -1;
  int k = 0;
  for (; k < n && !c->wcs.empty(); ++k) {
    wc[k] = c->wcs.front();
    c->wcs.pop_front();
  }
  return k;
}

}  // namespace

const FakePort* FabricState::portOf(const QpObj* q) const {
  auto& dev = ctxs.at(q->qp.context)->dev->spec;
  return &dev.ports[size_t(q->port - 1)];
}

MrObj* FabricState::findMr(uint32_t lkey) {
  for (auto& [k, m] : mrs)
    if (m->mr.lkey == lkey) return m.get();
  return nullptr;
}

void FabricState::push(CqObj* cq, const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) errorWcs++;
  if (int(cq->wcs.size()) >= cq->cq.cqe) {
    cq->overrun = true;
    misuse.push_back("CQ overrun");
    return;
  }
  cq->wcs.push_back(wc);
}

void FabricState::toError(QpObj* q) {
  if (q->qp.state == IBV_QPS_ERR) return;
  q->qp.state = IBV_QPS_ERR;
  const uint32_t qpn = q->qp.qp_num;
  for (auto it = pending.begin(); it != pending.end();) {
    if (it->qpn != qpn) {
      ++it;
      continue;
    }
    push(q->scq, makeWc(it->wrId, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, qpn));
    q->sqOut--;
    it = pending.erase(it);
  }
  for (auto& r : q->rq) push(q->rcq, makeWc(r.wrId, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qpn));
  q->rq.clear();
}

void FabricState::countFrom(const QpObj* src, size_t bytes) {
  portBytes[{ctxs.at(src->qp.context)->dev->spec.name, src->port}] += bytes;
}

bool FabricState::peerOk(const QpObj* src, const QpObj* dst) const {
  bool ok = dst && (dst->qp.state == IBV_QPS_RTR || dst->qp.state == IBV_QPS_RTS) &&
            dst->attr.dest_qp_num == src->qp.qp_num && dst->attr.rq_psn == src->attr.sq_psn;
  if (!ok) return false;
  const FakePort* dp = portOf(dst);
  // A link that is down carries nothing either way.
  if (portOf(src)->state != IBV_PORT_ACTIVE || dp->state != IBV_PORT_ACTIVE) return false;
  const auto& ah = src->attr.ah_attr;
  if (dp->linkLayer == IBV_LINK_LAYER_ETHERNET)
    return ah.is_global && memcmp(ah.grh.dgid.raw, dp->gids[dst->attr.ah_attr.grh.sgid_index].gid.raw, 16) == 0;
  return ah.dlid == dp->lid;
}

// One SEND or RDMA write, from gathering its bytes to both completions.
void FabricState::deliver(SendWr& w) {
  QpObj* src = byQpn.at(w.qpn);
  src->sqOut--;
  ibv_wc_status st = w.forced;
  std::vector<uint8_t> data = w.inlineData;
  if (st == IBV_WC_SUCCESS && !w.isInline) {
    for (auto& g : w.sges) {
      if (!sgeOk(this, g, src->pd, false)) {
        st = IBV_WC_LOC_PROT_ERR;
        break;
      }
      readThrough(findMr(g.lkey), g.addr, g.length, &data);
    }
  }
  const bool write = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  const ibv_wc_opcode op = write ? IBV_WC_RDMA_WRITE : IBV_WC_SEND;
  if (st == IBV_WC_SUCCESS && write) {
    deliverWrite(w, src, data);
    return;
  }
  QpObj* dst = nullptr;
  if (st == IBV_WC_SUCCESS) {
    auto it = byQpn.find(src->attr.dest_qp_num);
    dst = it == byQpn.end() ? nullptr : it->second;
    // An unreachable or mismatched peer never acknowledges: the sender retries, then gives up.
    if (!peerOk(src, dst)) st = IBV_WC_RETRY_EXC_ERR;
    else if (dst->rq.empty()) st = IBV_WC_RNR_RETRY_EXC_ERR;
  }
  if (st == IBV_WC_SUCCESS) {
    RecvWr r = std::move(dst->rq.front());
    dst->rq.pop_front();
    size_t room = 0;
    bool ok = true;
    for (auto& g : r.sges) {
      room += g.length;
      ok = ok && sgeOk(this, g, dst->pd, true);
    }
    if (!ok || data.size() > room) {
      push(dst->rcq, makeWc(r.wrId, ok ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, dst->qp.qp_num));
      toError(dst);
      st = ok ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR;
    } else {
      size_t off = 0;
      for (auto& g : r.sges) {
        size_t n = std::min<size_t>(g.length, data.size() - off);
        if (n) writeThrough(findMr(g.lkey), g.addr, data.data() + off, n);
        off += n;
      }
      ibv_wc wc = makeWc(r.wrId, IBV_WC_SUCCESS, IBV_WC_RECV, dst->qp.qp_num);
      wc.byte_len = uint32_t(data.size());
      wc.src_qp = src->qp.qp_num;
      if (w.opcode == IBV_WR_SEND_WITH_IMM) {
        wc.wc_flags |= IBV_WC_WITH_IMM;
        wc.imm_data = w.imm;
      }
      push(dst->rcq, wc);
      traffic.sends++;
      traffic.sendBytes += data.size();
      countFrom(src, data.size());
    }
  }
  if (st != IBV_WC_SUCCESS) {
    push(src->scq, makeWc(w.wrId, st, op, src->qp.qp_num));
    toError(src);  // flushes what the sender still has posted
  } else if (w.signaled) {
    ibv_wc wc = makeWc(w.wrId, IBV_WC_SUCCESS, op, src->qp.qp_num);
    wc.byte_len = uint32_t(data.size());
    push(src->scq, wc);
  }
}

// An RDMA write (with immediate: it also consumes the target's oldest RECV). The target
// checks the key, the range and the rights of its region and of its QP; a refusal is a
// remote access error for the sender and puts both QPs in ERROR.
void FabricState::deliverWrite(SendWr& w, QpObj* src, std::vector<uint8_t>& data) {
  const bool imm = w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  auto it = byQpn.find(src->attr.dest_qp_num);
  QpObj* dst = it == byQpn.end() ? nullptr : it->second;
  ibv_wc_status st = IBV_WC_SUCCESS;
  uint64_t addr = w.remoteAddr;
  if (!data.empty() && shiftNext) {
    addr += uint64_t(shiftNext);
    shiftNext = 0;
  }
  MrObj* m = nullptr;
  if (!peerOk(src, dst)) {
    st = IBV_WC_RETRY_EXC_ERR;
  } else if (!data.empty()) {  // a zero-length write touches no memory: no key is checked
    m = findRemoteMr(w.rkey, dst->pd);
    const auto lo = m ? reinterpret_cast<uintptr_t>(m->mr.addr) : 0;
    if (!m || !(m->access & IBV_ACCESS_REMOTE_WRITE) || !(dst->access & IBV_ACCESS_REMOTE_WRITE) || addr < lo ||
        addr + data.size() > lo + m->mr.length || addr + data.size() < addr)
      st = IBV_WC_REM_ACCESS_ERR;
  }
  if (st == IBV_WC_SUCCESS && imm && dst->rq.empty()) st = IBV_WC_RNR_RETRY_EXC_ERR;
  if (st != IBV_WC_SUCCESS) {
    push(src->scq, makeWc(w.wrId, st, IBV_WC_RDMA_WRITE, src->qp.qp_num));
    toError(src);
    if (st == IBV_WC_REM_ACCESS_ERR) toError(dst);
    return;
  }
  if (m) writeThrough(m, addr, data.data(), data.size());
  traffic.writes++;
  traffic.writeBytes += data.size();
  countFrom(src, data.size());
  if (imm) {
    traffic.writesWithImm++;
    RecvWr r = std::move(dst->rq.front());
    dst->rq.pop_front();
    ibv_wc wc = makeWc(r.wrId, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, dst->qp.qp_num);
    wc.byte_len = uint32_t(data.size());
    wc.src_qp = src->qp.qp_num;
    wc.wc_flags |= IBV_WC_WITH_IMM;
    wc.imm_data = w.imm;
    push(dst->rcq, wc);
  }
  if (w.signaled) {
    ibv_wc wc = makeWc(w.wrId, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, src->qp.qp_num);
    wc.byte_len = uint32_t(data.size());
    push(src->scq, wc);
  }
}

// In post order, or (shuffled) the oldest of a random QP at a time, and only part of
// what is pending, so that other QPs' work overtakes it.
void FabricState::deliverPending() {
  size_t budget = pending.size();
  if (shuffle && budget > 1) budget = 1 + (*shuffle)() % budget;
  while (!pending.empty() && budget-- > 0) {
    size_t pick = 0;
    if (shuffle) {
      std::vector<size_t> heads;
      std::set<uint32_t> seen;
      for (size_t i = 0; i < pending.size(); ++i)
        if (seen.insert(pending[i].qpn).second) heads.push_back(i);
      pick = heads[(*shuffle)() % heads.size()];
    }
    SendWr w = std::move(pending[pick]);
    pending.erase(pending.begin() + long(pick));
    if (failNext != IBV_WC_SUCCESS) {
      w.forced = failNext;
      failNext = IBV_WC_SUCCESS;
    }
    deliver(w);
  }
}

void fillQpOps(VerbsOps* v) {
  v->create_qp = createQp;
  v->modify_qp = modifyQp;
  v->destroy_qp = destroyQp;
  v->post_send = postSend;
  v->post_recv = postRecv;
  v->poll_cq = pollCq;
}

}  // namespace coll::net::ib::fake
