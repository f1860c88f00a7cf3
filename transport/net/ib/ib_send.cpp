// The sending side of an InfiniBand connection (protocol: ib_backend.cpp): eager
// messages piece by piece through the bounce slots, zero-copy ones as a header through
// the slots and RDMA writes from the user's buffer into the region the receiver offers.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "transport/net/ib/ib_comm.hpp"

namespace coll::net::ib {

SendComm::SendComm(std::unique_ptr<QpSet> qp, std::shared_ptr<CounterTotals> totals, uint64_t zcopyMin)
    : Comm(kSendMagic, std::move(qp), std::move(totals), zcopyMin) {
  credits_ = qp_->slots();
  owner_.assign(qp_->slots(), nullptr);
  writesOut_.assign(qp_->nqps(), 0);
  // Credits (one per slot the receiver reposts, in batches) and regions (one per
  // message, kCtsDepth at most between two polls) land in these.
  for (uint32_t i = 0; i < qp_->slots() + kCtsDepth; ++i) postRecv(0, wrId(kWrCtrl, i), qp_->ctrl(i), kCtrlBytes);
}

Request* SendComm::post(const void* data, size_t size, uint64_t tag) {
  checkUsable();
  Request* r = allocRequest();
  if (!r) return nullptr;
  r->data = static_cast<uint8_t*>(const_cast<void*>(data));
  r->size = size;
  r->tag = tag;
  r->zcopy = zcopyMin_ && size >= zcopyMin_;
  if (r->zcopy) {
    try {
      acquireAll(r, data, size, false);
    } catch (...) {
      r->used = false;
      throw;
    }
  }
  r->seq = nextSeq_++;
  r->slotBytes = r->zcopy ? 0 : size;
  auto early = early_.find(r->seq);
  if (early != early_.end()) {
    if (r->zcopy) take(r, early->second);
    early_.erase(early);  // an eager message needs no region
  }
  queue_.push_back(r);
  if (r->zcopy) writing_.push_back(r);
  progress();
  return r;
}

void SendComm::advance() {
  advanceSlots();
  for (size_t i = 0; i < writing_.size();) {
    Request* r = writing_[i];
    advanceWrites(r);
    if (r->stripes == (1u << qp_->nqps()) - 1) writing_.erase(writing_.begin() + long(i));
    else ++i;
  }
}

// Headers and eager payload, in message order, one SEND per slot while credits last.
// A zero-copy header takes two credits: its own and the one its write with immediate on
// QP 0 will need. Were that one left to later, the headers of later messages, whose
// receives may wait for this message to complete, could take every credit first.
void SendComm::advanceSlots() {
  const uint32_t slots = qp_->slots();
  while (credits_ > 0 && busy_ < slots && !queue_.empty()) {
    Request* r = queue_.front();
    const bool zcopyHeader = r->zcopy && !r->started;
    if (zcopyHeader && credits_ < 2) return;
    const uint32_t s = head_;
    uint8_t* p = qp_->slot(s);
    uint32_t len = 0;
    if (!r->started) {
      MsgHeader h{r->size, r->tag, r->zcopy ? kMsgZcopy : kMsgEager, r->seq};
      memcpy(p, &h, sizeof(h));
      len = kHeaderBytes;
      r->started = true;
    }
    size_t n = std::min<size_t>(qp_->chunk() - len, r->slotBytes - r->moved);
    if (n) memcpy(p + len, r->data + r->moved, n);
    len += uint32_t(n);
    r->moved += n;
    ibv_sge sge{reinterpret_cast<uintptr_t>(p), len, qp_->lkey()};
    ibv_send_wr wr{};
    wr.wr_id = wrId(kWrData, s);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | (len <= qp_->maxInline() ? IBV_SEND_INLINE : 0);
    postSend(0, &wr);
    owner_[s] = r;
    r->piecesOut++;
    head_ = (head_ + 1) % slots;
    busy_++;
    credits_ -= zcopyHeader ? 2 : 1;
    if (r->moved == r->slotBytes) queue_.pop_front();
  }
}

// Once the header is out and the region has come: every QP writes its stripe, the last
// write of each carrying the message's number as immediate data.
void SendComm::advanceWrites(Request* r) {
  if (!r->started || !r->ctsSent) return;
  for (uint32_t q = 0; q < qp_->nqps(); ++q)
    while (postWrite(r, q)) {
    }
}

bool SendComm::postWrite(Request* r, uint32_t q) {
  if ((r->stripes >> q) & 1 || writesOut_[q] >= kWriteDepth) return false;
  size_t lo = 0, hi = 0;
  stripeOf(r->wlen, q, qp_->nqps(), &lo, &hi);
  const size_t from = std::max(lo, r->wpos[q]);
  const size_t to = std::min(hi, from + kMaxWrite);
  const bool last = to == hi;
  ibv_sge sge{reinterpret_cast<uintptr_t>(r->data + from), uint32_t(to - from),
              registered(r) ? RegCache::keys(r->mr[qp_->devOfQp(q)]).lkey : 0};
  ibv_send_wr wr{};
  wr.wr_id = wrId(kWrWrite, reqIndex(r), q);
  wr.sg_list = to > from ? &sge : nullptr;
  wr.num_sge = to > from ? 1 : 0;
  wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.imm_data = htonl(r->seq);
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = r->raddr + from;
  wr.wr.rdma.rkey = r->rkey[qp_->peerPortOfQp(q)];
  // On QP 0 the write with immediate takes a slot's receive at the peer: its credit was
  // taken with the header.
  postSend(q, &wr);
  writesOut_[q]++;
  r->writesOut++;
  r->wpos[q] = to;
  if (last) r->stripes |= 1u << q;
  return true;
}

void SendComm::onCompletion(const ibv_wc& wc) {
  const uint32_t index = wrIndex(wc.wr_id), q = wrQp(wc.wr_id);
  switch (wrKind(wc.wr_id)) {
    case kWrCtrl:
      onControl(index, wc);
      return;
    case kWrWrite: {
      Request* r = index < reqs_.size() ? &reqs_[index] : nullptr;
      if (!r || q >= qp_->nqps() || !writesOut_[q] || !r->used || r->done || !r->writesOut)
        protocolError(strCat("a write completion for request ", index, " on queue pair ", q, " that has none out"));
      writesOut_[q]--;
      r->writesOut--;
      finishIfDone(r);
      return;
    }
    case kWrData: {
      // Sends on one QP complete in the order they were posted, so the oldest busy slot is done.
      const uint32_t slots = qp_->slots();
      const uint32_t tail = (head_ + slots - busy_) % slots;
      if (busy_ == 0 || index != tail || !owner_[index])
        protocolError(strCat("send completion for slot ", index, " out of order"));
      Request* r = owner_[index];
      owner_[index] = nullptr;
      busy_--;
      r->piecesOut--;
      finishIfDone(r);
      return;
    }
    default:
      protocolError(strCat("a completion of unknown kind (work request id 0x", std::hex, wc.wr_id, ")"));
  }
}

void SendComm::onControl(uint32_t entry, const ibv_wc& wc) {
  if (entry >= qp_->slots() + kCtsDepth) protocolError(strCat("a control receive in entry ", entry));
  if (wc.wc_flags & IBV_WC_WITH_IMM) {
    const uint32_t slots = qp_->slots();
    uint32_t n = ntohl(wc.imm_data);
    if (n == 0 || credits_ + n > slots || wc.byte_len != 0)
      protocolError(strCat("the receiver returned ", n, " credits, holding ", credits_, " of ", slots));
    credits_ += n;
  } else if (wc.byte_len == (qp_->peerPorts() > 1 ? sizeof(CtsPorts) : sizeof(Cts))) {
    // A receiver on several ports sends a key for each (ib_wire.hpp).
    CtsPorts c{};
    memcpy(&c, qp_->ctrl(entry), wc.byte_len);
    if (qp_->peerPorts() == 1) c.rkeys[0] = c.base.rkey;
    onRegion(c);
  } else {
    protocolError(strCat("a control message of ", wc.byte_len, " bytes"));
  }
  postRecv(0, wrId(kWrCtrl, entry), qp_->ctrl(entry), kCtrlBytes);
}

void SendComm::onRegion(const CtsPorts& region) {
  const Cts& c = region.base;
  if (c.magic != kCtsMagic) protocolError(strCat("a region with magic 0x", std::hex, c.magic));
  if (c.status != kCtsOk)
    fail(strCat("InfiniBand ", qp_->name(), " (peer ", qp_->peerName, "): the receiver could not register its buffer "
                "for message ", c.seq, " (its own error names the cause and the fix)"));
  if (int32_t(c.seq - nextSeq_) >= 0) {  // the receive was posted before this send
    if (early_.size() >= kCtsDepth || !early_.emplace(c.seq, region).second)
      protocolError(strCat("a region for message ", c.seq, " with ", early_.size(), " early ones held"));
    return;
  }
  Request* r = inFlight(c.seq);
  if (!r || !r->zcopy) return;  // the message went eager (a smaller one than the receive): no region needed
  if (r->ctsSent) protocolError(strCat("a second region for message ", c.seq));
  take(r, region);
}

void SendComm::take(Request* r, const CtsPorts& c) {
  r->ctsSent = true;
  r->raddr = c.base.addr;
  for (uint32_t p = 0; p < kMaxPorts; ++p) r->rkey[p] = c.rkeys[p];
  r->wlen = std::min<uint64_t>(r->size, c.base.len);
}

void SendComm::finishIfDone(Request* r) {
  if (r->done || !r->started || r->piecesOut) return;
  if (r->zcopy ? (!r->ctsSent || r->stripes != (1u << qp_->nqps()) - 1 || r->writesOut) : r->moved < r->slotBytes)
    return;
  finish(r);
}

const char* SendComm::what(const ibv_wc& wc) const {
  switch (wrKind(wc.wr_id)) {
    case kWrData: return "a send";
    case kWrWrite: return "an RDMA write";
    case kWrCtrl: return "a control receive (credits, regions)";
    default: return "a work request";
  }
}

}  // namespace coll::net::ib
