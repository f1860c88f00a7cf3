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

QpSet::QpSet(const std::vector<Port>& ports, const Tunables& tun, const QpShape& shape)
    : ports_(ports.begin(), ports.begin() + long(std::min<size_t>(ports.size(), shape.nqps))),
      tun_(tun), shape_(shape) {
  if (ports_.empty()) COLL_THROW(collInternalError, "InfiniBand: an endpoint without a port");
  for (const Port& p : ports_) {
    auto it = std::find(devs_.begin(), devs_.end(), p.dev);
    portDev_.push_back(uint32_t(it - devs_.begin()));
    if (it == devs_.end()) devs_.push_back(p.dev);
  }
  const VerbsOps& v = *ports_[0].dev->ops;
  try {
    size_t bytes = size_t(shape.chunk) * shape.slots + size_t(shape.ctrl) * kCtrlBytes;
    buf_ = static_cast<uint8_t*>(aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
    if (!buf_) COLL_THROW(collSystemError, "InfiniBand ", name(), ": cannot allocate ", bytes, " bytes of bounce buffers");
    {
      Device& d = *devs_[0];
      std::lock_guard<std::mutex> lock(d.mu);
      mr_ = v.reg_mr(d.pd, buf_, bytes, IBV_ACCESS_LOCAL_WRITE);
      if (!mr_) COLL_THROW(collSystemError, "ibv_reg_mr of ", bytes, " bytes on ", name(), ": ", sysErrorText(errno));
    }
    // Each device's CQ takes the completions of its QPs (QP 0's queues are deeper).
    for (uint32_t d = 0; d < devs_.size(); ++d) {
      int cqe = 4;
      for (uint32_t i = 0; i < shape.nqps; ++i)
        if (devOfQp(i) == d) cqe += int(i == 0 ? shape.send0 + shape.recv0 : shape.sendN + shape.recvN);
      std::lock_guard<std::mutex> lock(devs_[d]->mu);
      ibv_cq* cq = v.create_cq(devs_[d]->ctx, cqe, nullptr, nullptr, 0);
      if (!cq) COLL_THROW(collSystemError, "ibv_create_cq (", cqe, " entries) on ", devs_[d]->name, ": ", sysErrorText(errno));
      cqs_.push_back(cq);
    }
    for (uint32_t i = 0; i < shape.nqps; ++i)
      createQp(i, i == 0 ? shape.send0 : shape.sendN, i == 0 ? shape.recv0 : shape.recvN);
  } catch (...) {
    destroy();
    throw;
  }
}

void QpSet::createQp(uint32_t i, uint32_t send, uint32_t recv) {
  const Port& port = ports_[portOfQp(i)];
  const VerbsOps& v = *port.dev->ops;
  std::lock_guard<std::mutex> lock(port.dev->mu);
  ibv_qp_init_attr ia{};
  ia.send_cq = cqs_[devOfQp(i)];
  ia.recv_cq = cqs_[devOfQp(i)];
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = send;
  ia.cap.max_recv_wr = recv;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = kWantInline;
  ibv_qp* qp = v.create_qp(port.dev->pd, &ia);
  if (!qp) {  // some providers take no inline data
    ia.cap.max_inline_data = 0;
    qp = v.create_qp(port.dev->pd, &ia);
  }
  if (!qp) COLL_THROW(collSystemError, "ibv_create_qp on ", port.name, ": ", sysErrorText(errno));
  qps_.push_back(qp);
  psn_.push_back(uint32_t(randomU64() & 0xffffff));
  maxInline_ = qps_.size() == 1 ? ia.cap.max_inline_data : std::min(maxInline_, ia.cap.max_inline_data);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = port.num;
  // Receivers of zero-copy messages let the peer write into the regions they offer;
  // nothing else may touch our memory from the wire.
  a.qp_access_flags = shape_.remoteWrite ? IBV_ACCESS_REMOTE_WRITE : 0;
  int rc = v.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc) COLL_THROW(collSystemError, "ibv_modify_qp to INIT on ", port.name, ": ", sysErrorText(rc));
}

QpSet::~QpSet() { destroy(); }

// The QPs go first, so the NICs stop reading and writing memory before it is freed.
void QpSet::destroy() {
  const VerbsOps& v = *ports_[0].dev->ops;
  for (size_t i = 0; i < qps_.size(); ++i) {
    std::lock_guard<std::mutex> lock(ports_[portOfQp(uint32_t(i))].dev->mu);
    v.destroy_qp(qps_[i]);
  }
  for (size_t d = 0; d < cqs_.size(); ++d) {
    std::lock_guard<std::mutex> lock(devs_[d]->mu);
    v.destroy_cq(cqs_[d]);
  }
  if (mr_) {
    std::lock_guard<std::mutex> lock(devs_[0]->mu);
    v.dereg_mr(mr_);
  }
  free(buf_);
  qps_.clear();
  cqs_.clear();
  mr_ = nullptr;
  buf_ = nullptr;
}

void QpSet::describe(ConnInfo* c, ConnPorts* x, uint32_t kind) const {
  memset(c, 0, sizeof(*c));
  memset(x, 0, sizeof(*x));
  const Port& first = ports_[0];
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
  c->lid = first.lid;
  c->mtu = uint8_t(first.mtu);
  c->linkLayer = first.linkLayer;
  memcpy(c->gid, first.gid.raw, sizeof(c->gid));
  c->token = token;
  snprintf(c->port, sizeof(c->port), "%s", first.name.c_str());
  if (ports_.size() == 1) return;
  x->magic = kPortsMagic;
  x->version = kPortsVersion;
  x->bytes = sizeof(ConnPorts);
  x->nports = uint32_t(ports_.size());
  for (uint32_t i = 0; i < qps_.size(); ++i) x->qpPort[i] = uint8_t(portOfQp(i));
  for (size_t p = 1; p < ports_.size(); ++p) {
    PortAddr& a = x->ports[p - 1];
    a.lid = ports_[p].lid;
    a.mtu = uint8_t(ports_[p].mtu);
    a.linkLayer = ports_[p].linkLayer;
    memcpy(a.gid, ports_[p].gid.raw, sizeof(a.gid));
    snprintf(a.port, sizeof(a.port), "%s", ports_[p].name.c_str());
  }
}

void QpSet::connectTo(const ConnInfo& peer, const PeerPorts& where) {
  peerName = peer.port;
  peerPortNames.clear();
  for (uint32_t p = 0; p < where.nports; ++p) peerPortNames.push_back(where.ports[p].port);
  if (peer.linkLayer != ports_[0].linkLayer)
    COLL_THROW(collSystemError, "InfiniBand ", name(), " (",
               ports_[0].roce() ? "Ethernet" : "InfiniBand", ") cannot reach ", peer.port, " (",
               peer.linkLayer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand", ")");
  if (peer.nqps != qps_.size())
    COLL_THROW(collInvalidArgument, "InfiniBand ", name(), ": the peer ", peer.port, " has ", peer.nqps,
               " queue pairs for this connection, this side ", qps_.size(),
               " (COLL_IB_QPS and COLL_IB_PORTS must be alike on every rank)");
  peerPorts_ = where.nports;
  peerQpPort_.assign(where.qpPort, where.qpPort + peer.nqps);
  for (uint32_t i = 0; i < peer.nqps; ++i) connectQp(i, peer, where.ports[where.qpPort[i]]);
}

void QpSet::connectQp(uint32_t i, const ConnInfo& peer, const PortAddr& at) {
  const Port& port = ports_[portOfQp(i)];
  const VerbsOps& v = *port.dev->ops;
  if (at.linkLayer != port.linkLayer)
    COLL_THROW(collSystemError, "InfiniBand ", port.name, " cannot reach the peer's ", at.port, " (another link layer)");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = ibv_mtu(std::min<int>(port.mtu, at.mtu));
  a.dest_qp_num = peer.qpn[i];
  a.rq_psn = peer.psn[i];
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = port.num;
  a.ah_attr.sl = tun_.sl;
  if (port.roce()) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, at.gid, sizeof(at.gid));
    a.ah_attr.grh.sgid_index = uint8_t(port.gidIndex);
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = tun_.tc;
  } else {
    a.ah_attr.dlid = at.lid;
  }
  int rc = v.modify_qp(qps_[i], &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) COLL_THROW(collSystemError, "ibv_modify_qp to RTR on ", port.name, " (peer ", at.port, "): ", sysErrorText(rc));
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
  if (rc) COLL_THROW(collSystemError, "ibv_modify_qp to RTS on ", port.name, " (peer ", at.port, "): ", sysErrorText(rc));
}

}  // namespace coll::net::ib
