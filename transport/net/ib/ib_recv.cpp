// The receiving side of an InfiniBand connection (protocol: ib_backend.cpp): eager
// pieces copied out of the slots, regions offered for zero-copy messages, and the
// writes with immediate that say a stripe of one has landed.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "transport/net/ib/ib_comm.hpp"

namespace coll::net::ib {

RecvComm::RecvComm(std::unique_ptr<QpSet> qp, std::shared_ptr<CounterTotals> totals, uint64_t zcopyMin)
    : Comm(kRecvMagic, std::move(qp), std::move(totals), zcopyMin) {
  creditBatch_ = std::max<uint32_t>(1, qp_->slots() / 4);
  for (uint32_t i = 0; i < qp_->slots(); ++i) postRecv(0, wrId(kWrData, i), qp_->slot(i), qp_->chunk());
  for (uint32_t i = 0; i < kCtsDepth; ++i) freeCtrl_.push_back(kCtsDepth - 1 - i);
}

void RecvComm::accept(const ConnInfo& reply, const PeerPorts& where) {
  if (reply.zcopyMin != 0 && reply.zcopyMin != zcopyMin_)
    COLL_THROW(collInvalidArgument, "InfiniBand accept on ", qp_->name(), ": the sender ", reply.port,
               " wants zero-copy from ", reply.zcopyMin, " bytes, this side offered ", zcopyMin_,
               " (COLL_IB_ZCOPY and COLL_IB_ZCOPY_MIN must be alike on every rank)");
  zcopyMin_ = reply.zcopyMin;  // the sender may do none
  qp_->connectTo(reply, where);
}

Request* RecvComm::post(void* data, size_t size) {
  checkUsable();
  Request* r = allocRequest();
  if (!r) return nullptr;
  r->data = static_cast<uint8_t*>(data);
  r->cap = size;
  r->seq = nextSeq_++;
  // Offered before the message is seen: a sender that finds the region already there
  // writes at once, saving a round trip (a smaller, eager message leaves it unused).
  r->ctsWanted = zcopyMin_ && size >= zcopyMin_;
  queue_.push_back(r);
  progress();
  return r;
}

void RecvComm::onCompletion(const ibv_wc& wc) {
  const uint32_t index = wrIndex(wc.wr_id), q = wrQp(wc.wr_id);
  switch (wrKind(wc.wr_id)) {
    case kWrCredit:
      creditSends_--;
      return;
    case kWrCtrl:
      freeCtrl_.push_back(index);
      return;
    case kWrImm:
      if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM))
        protocolError(strCat("a send arrived on queue pair ", q, ", which only takes writes"));
      onWritten(ntohl(wc.imm_data));
      return;
    case kWrData:
      if (index >= qp_->slots()) protocolError(strCat("a receive completion for slot ", index));
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {  // the last write of QP 0's stripe took a slot's receive
        repostSlot(index);
        onWritten(ntohl(wc.imm_data));
        return;
      }
      if (wc.byte_len > qp_->chunk() || arrived_.size() >= qp_->slots())
        protocolError(strCat("a piece of ", wc.byte_len, " bytes arrived in slot ", index, " (", arrived_.size(),
                             " pending)"));
      arrived_.push_back({index, wc.byte_len});
      return;
    default:
      protocolError(strCat("a completion of unknown kind (work request id 0x", std::hex, wc.wr_id, ")"));
  }
}

void RecvComm::advance() {
  while (!arrived_.empty() && !queue_.empty()) {
    Arrival a = arrived_.front();
    arrived_.pop_front();
    consume(queue_.front(), a);
  }
  sendRegions();
  returnCredits();
}

void RecvComm::consume(Request* r, const Arrival& a) {
  const uint8_t* p = qp_->slot(a.slot);
  uint32_t len = a.bytes;
  if (!r->started) {
    startMessage(r, p, len);
    if (r->zcopy) {
      repostSlot(a.slot);
      queue_.pop_front();  // its bytes come by RDMA: the next piece is the next message's
      finishIfDone(r);
      return;
    }
    p += kHeaderBytes;
    len -= kHeaderBytes;
  }
  if (len > r->size - r->moved)
    protocolError(strCat("a piece of ", len, " bytes overruns a message of ", r->size, " bytes at offset ", r->moved));
  // A message larger than its receive still arrives whole; only `cap` bytes are kept.
  if (r->moved < r->cap) memcpy(r->data + r->moved, p, std::min<size_t>(len, r->cap - r->moved));
  r->moved += len;
  repostSlot(a.slot);
  if (r->moved == r->size) finish(r);
}

// The header of the message `r` receives.
void RecvComm::startMessage(Request* r, const uint8_t* p, uint32_t len) {
  if (len < kHeaderBytes) protocolError(strCat("a message starts with ", len, " bytes, less than its header"));
  MsgHeader h;
  memcpy(&h, p, sizeof(h));
  if (h.seq != r->seq) protocolError(strCat("message ", h.seq, " arrived where message ", r->seq, " was due"));
  if (h.kind != kMsgEager && h.kind != kMsgZcopy) protocolError(strCat("a message of unknown kind ", h.kind));
  r->size = h.size;
  r->tag = h.tag;
  r->started = true;
  if (h.kind == kMsgZcopy) {
    if (len != kHeaderBytes) protocolError(strCat("a request to send with ", len - kHeaderBytes, " bytes of payload"));
    if (!zcopyMin_) protocolError("a zero-copy message on a connection that has no zero-copy");
    r->zcopy = true;
    r->wlen = std::min(r->size, r->cap);
    if (!r->ctsSent) r->ctsWanted = true;
    return;
  }
  // Eager: a region offered for it stays unused (the sender drops it).
  r->ctsWanted = false;
  if (r->ctsSent) {
    if (qp_->nqps() > 1) surplus_++;
    releaseAll(r);
  }
}

void RecvComm::onWritten(uint32_t seq) {
  Request* r = inFlight(seq);
  if (!r || !r->ctsSent) protocolError(strCat("an RDMA write for message ", seq, ", which has no region"));
  if (++r->stripes > qp_->nqps()) protocolError(strCat("more writes for message ", seq, " than queue pairs"));
  finishIfDone(r);
}

void RecvComm::finishIfDone(Request* r) {
  if (r->zcopy && r->started && r->stripes == qp_->nqps()) finish(r);
}

void RecvComm::sendRegions() {
  for (Request& r : reqs_) {
    if (!r.used || r.done || !r.ctsWanted || r.ctsSent) continue;
    if (freeCtrl_.empty()) return;
    uint32_t e = freeCtrl_.back();
    freeCtrl_.pop_back();
    sendRegion(&r, e);
  }
}

// Registers the receive's buffer and offers it. A registration the device refuses is
// still answered, so the sender fails at once with a pointer to this side's reason.
void RecvComm::sendRegion(Request* r, uint32_t entry) {
  CtsPorts region{};
  Cts& c = region.base;
  c = Cts{kCtsMagic, r->seq, 0, 0, 0, kCtsOk};
  std::string failure;
  if (r->cap > 0) {
    try {
      acquireAll(r, r->data, r->cap, true);
      c.addr = reinterpret_cast<uintptr_t>(r->data);
      c.len = r->cap;
      // The writes of each port go through the registration on that port's device.
      for (uint32_t p = 0; p < qp_->nports(); ++p) region.rkeys[p] = RegCache::keys(r->mr[qp_->devOfPort(p)]).rkey;
      c.rkey = region.rkeys[0];
    } catch (const Error& e) {
      failure = e.what();
      c.status = kCtsRegFailed;
    }
  }
  if (c.status == kCtsOk) {
    // Each other QP ends its stripe with a write with immediate, which needs a receive.
    if (surplus_ > 0) surplus_--;
    else
      for (uint32_t q = 1; q < qp_->nqps(); ++q) postRecv(q, wrId(kWrImm, 0, q), nullptr, 0);
  }
  // One port: the plain region, as before ports; several: a key for each.
  const uint32_t len = qp_->nports() > 1 ? uint32_t(sizeof(region)) : uint32_t(sizeof(c));
  memcpy(qp_->ctrl(entry), &region, len);
  ibv_sge sge{reinterpret_cast<uintptr_t>(qp_->ctrl(entry)), len, qp_->lkey()};
  ibv_send_wr wr{};
  wr.wr_id = wrId(kWrCtrl, entry);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | (len <= qp_->maxInline() ? IBV_SEND_INLINE : 0);
  postSend(0, &wr);
  r->ctsSent = true;
  r->ctsWanted = false;
  if (!failure.empty()) fail(failure);
}

void RecvComm::repostSlot(uint32_t slot) {
  postRecv(0, wrId(kWrData, slot), qp_->slot(slot), qp_->chunk());
  unreturned_++;
}

// Credits go back in batches (a quarter of the slots): the sender cannot stall on a
// partial batch, since with no credits left every slot is in flight or waiting here.
void RecvComm::returnCredits() {
  if (unreturned_ < creditBatch_ || creditSends_ >= qp_->slots()) return;
  ibv_send_wr wr{};
  wr.wr_id = wrId(kWrCredit, 0);
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(unreturned_);
  wr.send_flags = IBV_SEND_SIGNALED;
  postSend(0, &wr);
  creditSends_++;
  unreturned_ = 0;
}

const char* RecvComm::what(const ibv_wc& wc) const {
  switch (wrKind(wc.wr_id)) {
    case kWrData: return "a receive";
    case kWrCredit: return "a credit send";
    case kWrCtrl: return "a region send (clear to send)";
    case kWrImm: return "a write-completion receive";
    default: return "a work request";
  }
}

}  // namespace coll::net::ib
