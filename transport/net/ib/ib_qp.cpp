// Creating, connecting and destroying the verbs objects of one InfiniBand endpoint.
#include "transport/net/ib/ib_qp.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>

#include "core/error.hpp"

namespace coll::net::ib {
namespace {

// Small messages (headers, a few bytes of payload) go inline in the work request.
constexpr uint32_t kWantInline = 64;

}  // namespace

uint64_t randomU64() {
  thread_local std::mt19937_64 gen{(uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()};
  return gen();
}

QpSet::QpSet(const Port& port, const Tunables& tun, uint32_t chunk, uint32_t slots,
             uint32_t sendDepth, uint32_t recvDepth)
    : port_(port), tun_(tun), chunk_(chunk), slots_(slots) {
  const VerbsOps& v = *port_.dev->ops;
  Device& d = *port_.dev;
  psn_ = uint32_t(randomU64() & 0xffffff);
  try {
    size_t bytes = size_t(chunk) * slots;
    buf_ = static_cast<uint8_t*>(aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    if (!buf_) COLL_THROW(collSystemError, "InfiniBand ", port_.name, ": cannot allocate ", bytes, " bytes of bounce buffers");
    std::lock_guard<std::mutex> lock(d.mu);
    mr_ = v.reg_mr(d.pd, buf_, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!mr_) COLL_THROW(collSystemError, "ibv_reg_mr of ", bytes, " bytes on ", port_.name, ": ", sysErrorText(errno));
    int cqe = int(sendDepth + recvDepth + 4);
    cq_ = v.create_cq(d.ctx, cqe, nullptr, nullptr, 0);
    if (!cq_) COLL_THROW(collSystemError, "ibv_create_cq (", cqe, " entries) on ", port_.name, ": ", sysErrorText(errno));
    ibv_qp_init_attr ia{};
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = sendDepth;
    ia.cap.max_recv_wr = recvDepth;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = kWantInline;
    qp_ = v.create_qp(d.pd, &ia);
    if (!qp_) {  // some providers take no inline data
      ia.cap.max_inline_data = 0;
      qp_ = v.create_qp(d.pd, &ia);
    }
    if (!qp_) COLL_THROW(collSystemError, "ibv_create_qp on ", port_.name, ": ", sysErrorText(errno));
    maxInline_ = ia.cap.max_inline_data;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = port_.num;
    a.qp_access_flags = 0;  // only SENDs: no remote access to our memory
    int rc = v.modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc) COLL_THROW(collSystemError, "ibv_modify_qp to INIT on ", port_.name, ": ", sysErrorText(rc));
  } catch (...) {
    destroy();
    throw;
  }
}

QpSet::~QpSet() { destroy(); }

// The QP goes first, so the NIC stops writing into the slots before they are freed.
void QpSet::destroy() {
  const VerbsOps& v = *port_.dev->ops;
  std::lock_guard<std::mutex> lock(port_.dev->mu);
  if (qp_) v.destroy_qp(qp_);
  if (cq_) v.destroy_cq(cq_);
  if (mr_) v.dereg_mr(mr_);
  free(buf_);
  qp_ = nullptr;
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
  c->qpn = qp_->qp_num;
  c->psn = psn_;
  c->chunk = chunk_;
  c->slots = slots_;
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
  const VerbsOps& v = *port_.dev->ops;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = ibv_mtu(std::min<int>(port_.mtu, peer.mtu));
  a.dest_qp_num = peer.qpn;
  a.rq_psn = peer.psn;
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
  int rc = v.modify_qp(qp_, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) COLL_THROW(collSystemError, "ibv_modify_qp to RTR on ", port_.name, " (peer ", peer.port, "): ", sysErrorText(rc));
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = tun_.timeout;
  a.retry_cnt = tun_.retry;
  // The credit protocol keeps a receive posted for every send, so receiver-not-ready
  // never happens in steady state; retrying covers a peer that is still connecting.
  a.rnr_retry = 7;
  a.sq_psn = psn_;
  a.max_rd_atomic = 1;
  rc = v.modify_qp(qp_, &a,
                   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                       IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc) COLL_THROW(collSystemError, "ibv_modify_qp to RTS on ", port_.name, " (peer ", peer.port, "): ", sysErrorText(rc));
}

}  // namespace coll::net::ib
