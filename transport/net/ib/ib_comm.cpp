// The data path of the InfiniBand backend (protocol: see ib_backend.cpp).
#include "transport/net/ib/ib_comm.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "core/error.hpp"

namespace coll::net::ib {
namespace {
constexpr int kPollBatch = 16;
}

void Comm::checkUsable() const {
  if (!error_.empty()) throw Error(collRemoteError, error_);
}

void Comm::fail(const std::string& why) {
  if (error_.empty()) error_ = why;
  throw Error(collRemoteError, error_);
}

Request* Comm::allocRequest() {
  for (Request& r : reqs_) {
    if (r.used) continue;
    r = Request{};
    r.comm = this;
    r.used = true;
    return &r;
  }
  return nullptr;
}

void Comm::postRecv(uint64_t id, uint8_t* addr, uint32_t len) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(addr), len, len ? qp_->lkey() : 0};
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  ibv_recv_wr* bad = nullptr;
  int rc = qp_->ops().post_recv(qp_->qp(), &wr, &bad);
  if (rc) fail(strCat("ibv_post_recv on ", qp_->name(), ": ", sysErrorText(rc)));
}

void Comm::progress() {
  checkUsable();
  ibv_wc wc[kPollBatch];
  for (;;) {
    int n = qp_->ops().poll_cq(qp_->cq(), kPollBatch, wc);
    if (n < 0) fail(strCat("ibv_poll_cq on ", qp_->name(), " failed (", n, ")"));
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wc[i];
      if (w.status != IBV_WC_SUCCESS) {
        bool data = (w.wr_id >> 56) == kWrData;
        const char* what = magic == kSendMagic ? (data ? "a send" : "a credit receive")
                                                : (data ? "a receive" : "a credit send");
        fail(strCat("InfiniBand ", qp_->name(), " (peer ", qp_->peerName, "): ", what,
                    " failed: ", ibv_wc_status_str(w.status), " (status ", int(w.status),
                    ", vendor error 0x", std::hex, w.vendor_err, ")"));
      }
      onCompletion(w);
    }
    if (n < kPollBatch) break;
  }
  advance();
}

bool Comm::test(Request* r, size_t* size, uint64_t* tag) {
  if (!r->used) COLL_THROW(collInvalidArgument, "InfiniBand: test() of a request that is not in flight");
  if (!r->done) progress();
  if (!r->done) return false;
  if (size) *size = r->size;
  if (tag) *tag = r->tag;
  r->used = false;
  return true;
}

// ---- sender ----

SendComm::SendComm(std::unique_ptr<QpSet> qp) : Comm(kSendMagic, std::move(qp)) {
  credits_ = qp_->slots();
  owner_.assign(qp_->slots(), nullptr);
  for (uint32_t i = 0; i < qp_->slots(); ++i) postRecv(wrId(kWrCredit, i), nullptr, 0);
}

Request* SendComm::post(const void* data, size_t size, uint64_t tag) {
  checkUsable();
  Request* r = allocRequest();
  if (!r) return nullptr;
  r->data = static_cast<uint8_t*>(const_cast<void*>(data));
  r->size = size;
  r->tag = tag;
  queue_.push_back(r);
  progress();
  return r;
}

void SendComm::advance() {
  const uint32_t slots = qp_->slots();
  while (credits_ > 0 && busy_ < slots) {
    Request* r = nullptr;
    for (Request* q : queue_)
      if (!q->started || q->moved < q->size) {
        r = q;
        break;
      }
    if (!r) return;
    const uint32_t s = head_;
    uint8_t* p = qp_->slot(s);
    uint32_t len = 0;
    if (!r->started) {
      MsgHeader h{r->size, r->tag};
      memcpy(p, &h, sizeof(h));
      len = kHeaderBytes;
      r->started = true;
    }
    size_t n = std::min<size_t>(qp_->chunk() - len, r->size - r->moved);
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
    ibv_send_wr* bad = nullptr;
    int rc = qp_->ops().post_send(qp_->qp(), &wr, &bad);
    if (rc) fail(strCat("ibv_post_send on ", qp_->name(), ": ", sysErrorText(rc)));
    owner_[s] = r;
    r->piecesOut++;
    head_ = (head_ + 1) % slots;
    busy_++;
    credits_--;
  }
}

void SendComm::onCompletion(const ibv_wc& wc) {
  const uint32_t slots = qp_->slots();
  const uint32_t slot = uint32_t(wc.wr_id);
  if ((wc.wr_id >> 56) == kWrCredit) {
    uint32_t n = (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
    if (n == 0 || credits_ + n > slots)
      fail(strCat("InfiniBand ", qp_->name(), ": protocol error: the receiver ", qp_->peerName,
                  " returned ", n, " credits, holding ", credits_, " of ", slots));
    credits_ += n;
    postRecv(wrId(kWrCredit, slot), nullptr, 0);
    return;
  }
  // Sends complete in the order they were posted, so the oldest busy slot is done.
  const uint32_t tail = (head_ + slots - busy_) % slots;
  if (busy_ == 0 || slot != tail || !owner_[slot])
    fail(strCat("InfiniBand ", qp_->name(), ": send completion for slot ", slot, " out of order"));
  Request* r = owner_[slot];
  owner_[slot] = nullptr;
  busy_--;
  r->piecesOut--;
  if (r->piecesOut == 0 && r->started && r->moved == r->size) {
    if (queue_.empty() || queue_.front() != r)
      fail(strCat("InfiniBand ", qp_->name(), ": a send completed out of message order"));
    r->done = true;
    queue_.pop_front();
  }
}

// ---- receiver ----

RecvComm::RecvComm(std::unique_ptr<QpSet> qp) : Comm(kRecvMagic, std::move(qp)) {
  creditBatch_ = std::max<uint32_t>(1, qp_->slots() / 4);
  for (uint32_t i = 0; i < qp_->slots(); ++i) postRecv(wrId(kWrData, i), qp_->slot(i), qp_->chunk());
}

void RecvComm::accept(const ConnInfo& reply) { qp_->connectTo(reply); }

Request* RecvComm::post(void* data, size_t size) {
  checkUsable();
  Request* r = allocRequest();
  if (!r) return nullptr;
  r->data = static_cast<uint8_t*>(data);
  r->cap = size;
  queue_.push_back(r);
  progress();
  return r;
}

void RecvComm::onCompletion(const ibv_wc& wc) {
  if ((wc.wr_id >> 56) == kWrCredit) {
    creditSends_--;
    return;
  }
  const uint32_t slot = uint32_t(wc.wr_id);
  if (slot >= qp_->slots() || wc.byte_len > qp_->chunk() || arrived_.size() >= qp_->slots())
    fail(strCat("InfiniBand ", qp_->name(), ": protocol error: a piece of ", wc.byte_len,
                " bytes arrived in slot ", slot, " (", arrived_.size(), " pending)"));
  arrived_.push_back({slot, wc.byte_len});
}

void RecvComm::advance() {
  while (!arrived_.empty() && !queue_.empty()) {
    Arrival a = arrived_.front();
    arrived_.pop_front();
    consume(queue_.front(), a);
  }
  returnCredits();
}

void RecvComm::consume(Request* r, const Arrival& a) {
  const uint8_t* p = qp_->slot(a.slot);
  uint32_t len = a.bytes;
  if (!r->started) {
    if (len < kHeaderBytes)
      fail(strCat("InfiniBand ", qp_->name(), ": protocol error: a message from ", qp_->peerName,
                  " starts with ", len, " bytes, less than its header"));
    MsgHeader h;
    memcpy(&h, p, sizeof(h));
    r->size = h.size;
    r->tag = h.tag;
    r->started = true;
    p += kHeaderBytes;
    len -= kHeaderBytes;
  }
  if (len > r->size - r->moved)
    fail(strCat("InfiniBand ", qp_->name(), ": protocol error: a piece of ", len,
                " bytes overruns a message of ", r->size, " bytes at offset ", r->moved));
  // A message larger than its receive still arrives whole; only `cap` bytes are kept.
  if (r->moved < r->cap) memcpy(r->data + r->moved, p, std::min<size_t>(len, r->cap - r->moved));
  r->moved += len;
  postRecv(wrId(kWrData, a.slot), qp_->slot(a.slot), qp_->chunk());
  unreturned_++;
  if (r->moved == r->size) {
    r->done = true;
    queue_.pop_front();
  }
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
  ibv_send_wr* bad = nullptr;
  int rc = qp_->ops().post_send(qp_->qp(), &wr, &bad);
  if (rc) fail(strCat("ibv_post_send (credits) on ", qp_->name(), ": ", sysErrorText(rc)));
  creditSends_++;
  unreturned_ = 0;
}

}  // namespace coll::net::ib
