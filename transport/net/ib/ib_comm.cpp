// What send and receive endpoints of the InfiniBand backend share: requests, polling,
// posting and failing with a message that names the device, the peer and the cause.
#include "transport/net/ib/ib_comm.hpp"

#include <algorithm>
#include <cstring>

#include "base/error.hpp"

namespace coll::net::ib {
namespace {
constexpr int kPollBatch = 16;
}

const char* completionHint(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_RETRY_EXC_ERR:
      return "the peer did not acknowledge: its process died or closed the connection, or the link between "
             "the ports is down (check the peer's own error first, then the ports with ibstat); on a congested "
             "fabric raise COLL_IB_TIMEOUT";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "the peer had no receive posted: a protocol error in this library, please report it";
    case IBV_WC_REM_ACCESS_ERR:
      return "the peer's memory region refused the RDMA write (a key or an address range the peer has not "
             "registered, or no longer has): a buffer freed or remapped during the call, or a protocol error; "
             "the peer's queue pair is now in the error state";
    case IBV_WC_LOC_PROT_ERR:
      return "this side's registration does not cover the buffer: it was freed or remapped while in use";
    case IBV_WC_WR_FLUSH_ERR:
      return "the queue pair is in the error state after an earlier failure on this connection (that "
             "failure, here or on the peer, is the cause)";
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_LOC_LEN_ERR:
      return "the peer refused the request: a protocol error in this library, please report it";
    default:
      return "the NIC failed the operation";
  }
}

Comm::Comm(uint32_t magic, std::unique_ptr<QpSet> qp, std::shared_ptr<CounterTotals> totals, uint64_t zcopyMin)
    : magic(magic), qp_(std::move(qp)), totals_(std::move(totals)), zcopyMin_(zcopyMin) {
  for (uint32_t d = 0; d < qp_->ndevs(); ++d) devs_.push_back(qp_->device(d));
}

Comm::~Comm() {
  qp_.reset();
  for (Request& r : reqs_) releaseAll(&r);
  magic = 0;
}

void Comm::acquireAll(Request* r, const void* p, size_t len, bool write) {
  try {
    for (uint32_t d = 0; d < devs_.size(); ++d) {
      uint32_t port = 0;  // the first port on the device, for messages
      while (qp_->devOfPort(port) != d) ++port;
      r->mr[d] = mem(d).acquire(p, len, write, qp_->portName(port));
    }
  } catch (...) {
    releaseAll(r);
    throw;
  }
}

void Comm::releaseAll(Request* r) {
  for (uint32_t d = 0; d < devs_.size(); ++d)
    if (r->mr[d]) {
      mem(d).release(r->mr[d]);
      r->mr[d] = nullptr;
    }
}

void Comm::checkUsable() const {
  if (!error_.empty()) throw Error(collRemoteError, error_);
}

void Comm::fail(const std::string& why) {
  if (error_.empty()) error_ = why;
  throw Error(collRemoteError, error_);
}

void Comm::protocolError(const std::string& what) {
  fail(strCat("InfiniBand ", qp_->name(), " (peer ", qp_->peerName, "): protocol error: ", what));
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

Request* Comm::inFlight(uint32_t seq) {
  for (Request& r : reqs_)
    if (r.used && !r.done && r.seq == seq) return &r;
  return nullptr;
}

void Comm::postRecv(uint32_t q, uint64_t id, uint8_t* addr, uint32_t len) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(addr), len, len ? qp_->lkey() : 0};
  ibv_recv_wr wr{};
  wr.wr_id = id;
  wr.sg_list = len ? &sge : nullptr;
  wr.num_sge = len ? 1 : 0;
  ibv_recv_wr* bad = nullptr;
  int rc = qp_->ops().post_recv(qp_->qp(q), &wr, &bad);
  if (rc) fail(strCat("ibv_post_recv on ", qp_->name(), ": ", sysErrorText(rc)));
}

void Comm::postSend(uint32_t q, ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  int rc = qp_->ops().post_send(qp_->qp(q), wr, &bad);
  if (rc) fail(strCat("ibv_post_send on ", qp_->name(), " (queue pair ", q, "): ", sysErrorText(rc)));
}

void Comm::progress() {
  checkUsable();
  ibv_wc wc[kPollBatch];
  for (uint32_t d = 0; d < qp_->ndevs(); ++d) {
    for (;;) {
      int n = qp_->ops().poll_cq(qp_->cq(d), kPollBatch, wc);
      if (n < 0) fail(strCat("ibv_poll_cq on ", devs_[d]->name, " failed (", n, ")"));
      for (int i = 0; i < n; ++i) {
        const ibv_wc& w = wc[i];
        if (w.status != IBV_WC_SUCCESS) {
          // Name the port the failed work request was on, and the peer's port it talked to.
          const uint32_t q = wrQp(w.wr_id) < qp_->nqps() ? wrQp(w.wr_id) : 0;
          const uint32_t pp = qp_->peerPortOfQpOr0(q);
          const std::string peer = pp < qp_->peerPortNames.size() ? qp_->peerPortNames[pp] : qp_->peerName;
          fail(strCat("InfiniBand ", qp_->portName(qp_->portOfQp(q)), " (peer ", peer, "): ", what(w),
                      " failed: ", ibv_wc_status_str(w.status), " (status ", int(w.status),
                      ", vendor error 0x", std::hex, w.vendor_err, std::dec, "): ", completionHint(w.status)));
        }
        onCompletion(w);
      }
      if (n < kPollBatch) break;
    }
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

void Comm::finish(Request* r) {
  r->done = true;
  auto it = std::find(queue_.begin(), queue_.end(), r);
  if (it != queue_.end()) queue_.erase(it);
  releaseAll(r);
  ByteCounts d;
  const bool send = magic == kSendMagic;
  if (r->zcopy) {
    d.zcopyMsgs = 1;
    d.zcopyBytes = r->wlen;
  } else {
    d.eagerMsgs = 1;
    d.eagerBytes = r->size;
    d.copiedBytes = send ? r->size : std::min(r->size, r->cap);
  }
  counts_ += d;
  totals_->add(send, d);
}

}  // namespace coll::net::ib
