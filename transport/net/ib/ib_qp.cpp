// Creating, connecting and destroying the verbs objects of one InfiniBand endpoint.
#include "transport/net/ib/ib_qp.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>

#include "base/error.hpp"

namespace coll::net::ib {
namespace {

// Small messages (headers, control entries, a few bytes of payload) go inline in the
// work request.
constexpr uint32_t kWantInline = 64;

}  // namespace

uint64_t randomU64() {
  thread_local std::mt19937_64 gen{(uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()};
  return gen();
}

QpSet::QpSet(const Port& port, const Tunables& tun, const QpShape& shape)
    : port_(port), tun_(tun), shape_(shape) {
  const VerbsOps& v = *port_.dev->ops;
  Device& d = *port_.dev;
  try {
    size_t bytes = size_t(shape.chunk) * shape.slots + size_t(shape.ctrl) * kCtrlBytes;
    buf_ = static_cast<uint8_t*>(aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    if (!buf_) COLL_THROW(collSystemError, "InfiniBand ", port_.name, ": cannot allocate ", bytes, " bytes of bounce buffers");
    std::lock_guard<std::mutex> lock(d.mu);
    mr_ = v.reg_mr(d.pd, buf_, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!mr_) COLL_THROW(collSystemError, "ibv_reg_mr of ", bytes, " bytes on ", port_.name, ": ", sysErrorText(errno));
    int cqe = int(shape.send0 + shape.recv0 + (shape.nqps - 1) * (shape.sendN + shape.recvN) + 4);
    cq_ = v.create_cq(d.ctx, cqe, nullptr, nullptr, 0);
    if (!cq_) COLL_THROW(collSystemError, "ibv_create_cq (", cqe, " entries) on ", port_.name, ": ", sysErrorText(errno));
    for (uint32_t i = 0; i < shape.nqps; ++i)
      createQp(i == 0 ? shape.send0 : shape.sendN, i == 0 ? shape.recv0 : shape.recvN);
  } catch (...) {
    destroy();
    throw;
  }
}

// Called with the device's lock held.
void QpSet::createQp(uint32_t send, uint32_t recv) {
  const VerbsOps& v = *port_.dev->ops;
  ibv_qp_init_attr ia{};
  ia.send_cq = cq_;
  ia.recv_cq = cq_;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = send;
  ia.cap.max_recv_wr = recv;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = kWantInline;
  ibv_qp* qp = v.create_qp(port_.dev->pd, &ia);
  if (!qp) {  // some providers take no inline data
    ia.cap.max_inline_data = 0;
    qp = v.create_qp(port_.dev->pd, &ia);
  }
  if (!qp) COLL_THROW(collSystemError, "ibv_create_qp on ", port_.name, ": ", sysErrorText(errno));
  qps_.push_back(qp);
  psn_.push_back(uint32_t(randomU64() & 0xffffff));
  maxInline_ = qps_.size() == 1 ? ia.cap.max_inline_data : std::min(maxInline_, ia.cap.max_inline_data);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = port_.num;
  // Receivers of zero-copy messages let the peer write into the regions they offer;
  // nothing else may touch our memory from the wire.
  a.qp_access_flags = shape_.remoteWrite ? IBV_ACCESS_REMOTE_WRITE : 0;
  int rc = v.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc) COLL_THROW(collSystemError, "ibv_modify_qp to INIT on ", port_.name, ": ", sysErrorText(rc));
}

QpSet::~QpSet() { destroy(); }

// The QPs go first, so the NIC stops reading and writing memory before it is freed.
void QpSet::destroy() {
  const VerbsOps& v = *port_.dev->ops;
  std::lock_guard<std::mutex> lock(port_.dev->mu);
  for (ibv_qp* qp : qps_) v.destroy_qp(qp);
  if (cq_) v.destroy_cq(cq_);
  if (mr_) v.dereg_mr(mr_);
  free(buf_);
  qps_.clear();
  cq_ = nullptr;
  mr_ = nullptr;
  buf_ = nullptr;
}

void QpSet::describe(ConnInfo* c, uint32_t kind) const {
  memset(c, 0, sizeof(*c));
  c->magic = kConnMagic;
  c->version = kWireVersion;
  c->bytes = sizeof(ConnInfo);
  c->kind = kind;
  c->nqps = uint32_t(qps_.size());
  for (size_t i = 0; i < qps_.size(); ++i) {
    c->qpn[i] = qps_[i]->qp_num;
    c->psn[i] = psn_[i];
  }
  c->chunk = shape_.chunk;
  c->slots = shape_.slots;
  c->lid = port_.lid;
  c->mtu = uint8_t(port_.mtu);
  c->linkLayer = port_.linkLayer;
  memcpy(c->gid, port_.gid.raw, sizeof(c->gid));
  c->token = token;
  snprintf(c->port, sizeof(c->port), "%s", port_.name.c_str());
}

void QpSet::connectTo(const ConnInfo& peer) {
  peerName = peer.port;
  if (peer.linkLayer != port_.linkLayer)
    COLL_THROW(collSystemError, "InfiniBand ", port_.name, " (",
               port_.roce() ? "Ethernet" : "InfiniBand", ") cannot reach ", peer.port, " (",
               peer.linkLayer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand", ")");
  if (peer.nqps != qps_.size())
    COLL_THROW(collInvalidArgument, "InfiniBand ", port_.name, ": the peer ", peer.port, " has ", peer.nqps,
               " queue pairs for this connection, this side ", qps_.size(), " (COLL_IB_QPS must be alike on every rank)");
  for (uint32_t i = 0; i < peer.nqps; ++i) connectQp(i, peer);
}

void QpSet::connectQp(uint32_t i, const ConnInfo& peer) {
  const VerbsOps& v = *port_.dev->ops;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = ibv_mtu(std::min<int>(port_.mtu, peer.mtu));
  a.dest_qp_num = peer.qpn[i];
  a.rq_psn = peer.psn[i];
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = port_.num;
  a.ah_attr.sl = tun_.sl;
  if (port_.roce()) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, peer.gid, sizeof(peer.gid));
    a.ah_attr.grh.sgid_index = uint8_t(port_.gidIndex);
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = tun_.tc;
  } else {
    a.ah_attr.dlid = peer.lid;
  }
  int rc = v.modify_qp(qps_[i], &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) COLL_THROW(collSystemError, "ibv_modify_qp to RTR on ", port_.name, " (peer ", peer.port, "): ", sysErrorText(rc));
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = tun_.timeout;
  a.retry_cnt = tun_.retry;
  // The protocol keeps a receive posted for every send and write with immediate, so
  // receiver-not-ready never happens in steady state; retrying covers a peer that is
  // still connecting.
  a.rnr_retry = 7;
  a.sq_psn = psn_[i];
  a.max_rd_atomic = 1;
  rc = v.modify_qp(qps_[i], &a,
                   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                       IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc) COLL_THROW(collSystemError, "ibv_modify_qp to RTS on ", port_.name, " (peer ", peer.port, "): ", sysErrorText(rc));
}

}  // namespace coll::net::ib
