// Messages: each is a head (user tag, true size, and the payload when it is small) and,
// for larger payloads, a data message straight from/into user memory. Both use exact
// UCX tags (connection id, sequence number, kind), so the n-th receive can only match
// the n-th send of its own connection. Requests are polled (no UCX callbacks), so no
// UCX completion ever touches plugin memory that a close has freed.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "ucx_plugin.hpp"

namespace coll::net_ucx {

namespace {

Request* freeSlot(Comm* c) {
  for (Request& r : c->reqs)
    if (r.state == ReqState::Free) return &r;
  return nullptr;
}

void release(Request* r) {
  r->state = ReqState::Free;
  r->error.clear();
  r->comm->inflight--;
}

// Posting returns UCS_INPROGRESS with *out set, or a final status with *out NULL.
ucs_status_t postSend(Comm* c, const void* buf, size_t len, uint64_t tag, void** out) {
  ucp_request_param_t p{};
  ucs_status_ptr_t r = ucp_tag_send_nbx(c->ep, buf, len, tag, &p);
  *out = UCS_PTR_IS_PTR(r) ? r : nullptr;
  return UCS_PTR_IS_PTR(r) ? UCS_INPROGRESS : UCS_PTR_STATUS(r);
}

ucs_status_t postRecv(Context* ctx, void* buf, size_t len, uint64_t tag, ucp_tag_recv_info_t* info,
                      void** out) {
  // Always a request (no immediate completion): its test fills the receive info, which
  // an immediate completion from UCX's unexpected queue may leave unset.
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  *info = ucp_tag_recv_info_t{};
  ucs_status_ptr_t r = ucp_tag_recv_nbx(ctx->worker, buf, len, tag, ~uint64_t{0}, &p);
  *out = UCS_PTR_IS_PTR(r) ? r : nullptr;
  return UCS_PTR_IS_PTR(r) ? UCS_INPROGRESS : UCS_PTR_STATUS(r);
}

void pollSend(void*& ucxReq, ucs_status_t& status) {
  if (!ucxReq) return;
  status = ucp_request_check_status(ucxReq);
  if (status != UCS_INPROGRESS) {
    ucp_request_free(ucxReq);
    ucxReq = nullptr;
  }
}

void pollRecv(void*& ucxReq, ucs_status_t& status, ucp_tag_recv_info_t* info) {
  if (!ucxReq) return;
  status = ucp_tag_recv_request_test(ucxReq, info);
  if (status != UCS_INPROGRESS) {
    ucp_request_free(ucxReq);
    ucxReq = nullptr;
  }
}

// Asks UCX to drop a request (works for receives not yet matched; others finish or fail).
void cancel(Context* ctx, void* ucxReq) {
  if (ucxReq) ucp_request_cancel(ctx->worker, ucxReq);
}

int setFailed(Request* r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
int setFailed(Request* r, const char* fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  r->state = ReqState::Failed;
  r->error = text;
  cancel(r->comm->ctx, r->head);
  cancel(r->comm->ctx, r->data);
  return -1;
}

// 1: done, 0: in flight, -1: failed (r->error says why).
int advanceSend(Request* r) {
  pollSend(r->head, r->headStatus);
  pollSend(r->data, r->dataStatus);
  for (ucs_status_t st : {r->headStatus, r->dataStatus})
    if (st != UCS_OK && st != UCS_INPROGRESS)
      return setFailed(r, "ucx: send of a %zu-byte message failed: %s", r->size, ucs_status_string(st));
  return r->headStatus == UCS_OK && r->dataStatus == UCS_OK;
}

int advanceRecv(Request* r, size_t* size, uint64_t* tag) {
  pollRecv(r->head, r->headStatus, &r->headInfo);
  pollRecv(r->data, r->dataStatus, &r->dataInfo);
  if (r->headStatus == UCS_INPROGRESS) return 0;
  if (r->headStatus != UCS_OK)
    return setFailed(r, "ucx: receive of a message head failed: %s", ucs_status_string(r->headStatus));
  WireHead h;
  if (r->headInfo.length < sizeof h)
    return setFailed(r, "ucx: message head of %zu bytes, expected at least %zu (peer speaks another protocol?)",
                     r->headInfo.length, sizeof h);
  memcpy(&h, r->buf, sizeof h);
  if (h.size <= kPackMax) {
    if (r->headInfo.length != sizeof h + h.size)
      return setFailed(r, "ucx: message head of %zu bytes announces a packed %llu-byte payload", r->headInfo.length,
                       (unsigned long long)h.size);
    // No data message follows a packed one: drop the receive posted for it.
    cancel(r->comm->ctx, r->data);
    pollRecv(r->data, r->dataStatus, &r->dataInfo);
    if (r->data) return 0;
    if (r->userSize) memcpy(r->user, r->buf + sizeof h, std::min<size_t>(r->userSize, h.size));
  } else {
    if (r->dataStatus == UCS_INPROGRESS) return 0;
    if (r->dataStatus != UCS_OK && r->dataStatus != UCS_ERR_MESSAGE_TRUNCATED)
      return setFailed(r, "ucx: receive of a %llu-byte message failed: %s", (unsigned long long)h.size,
                       ucs_status_string(r->dataStatus));
    if (r->dataStatus == UCS_OK && r->dataInfo.length != h.size)
      return setFailed(r, "ucx: message of %zu bytes where its head announced %llu", r->dataInfo.length,
                       (unsigned long long)h.size);
  }
  if (size) *size = size_t(h.size);
  if (tag) *tag = h.tag;
  return 1;
}

}  // namespace

int isend(Comm* c, const void* data, size_t size, uint64_t tag, Request** out) {
  Context* ctx = c->ctx;
  std::lock_guard<std::mutex> lock(ctx->mu);
  if (int st = c->epState->status.load(); st != UCS_OK)
    return fail("ucx: connection to peer failed: %s", ucs_status_string(ucs_status_t(st)));
  Request* r = freeSlot(c);
  if (!r) {
    *out = nullptr;
    return 0;
  }
  r->comm = c;
  r->size = size;
  r->head = r->data = nullptr;
  WireHead h{tag, size};
  memcpy(r->buf, &h, sizeof h);
  size_t headLen = sizeof h;
  if (size <= kPackMax) {
    if (size) memcpy(r->buf + sizeof h, data, size);
    headLen += size;
  }
  r->headStatus = postSend(c, r->buf, headLen, ucxTag(c->id(), c->seq, kKindHead), &r->head);
  if (UCS_STATUS_IS_ERR(r->headStatus))
    return fail("ucx: send of a %zu-byte message: %s", size, ucs_status_string(r->headStatus));
  r->dataStatus = UCS_OK;
  if (size > kPackMax) r->dataStatus = postSend(c, data, size, ucxTag(c->id(), c->seq, kKindData), &r->data);
  c->seq++;
  c->inflight++;
  r->state = ReqState::Live;
  if (UCS_STATUS_IS_ERR(r->dataStatus)) {
    // The head went out without its data, which the receiver would wait for: the
    // connection is unusable. The slot stays taken until close collects the head.
    c->epState->status.store(r->dataStatus);
    setFailed(r, "ucx: send of a %zu-byte message: %s", size, ucs_status_string(r->dataStatus));
    return fail("%s", r->error.c_str());
  }
  *out = r;
  return 0;
}

int irecv(Comm* c, void* data, size_t size, Request** out) {
  Context* ctx = c->ctx;
  std::lock_guard<std::mutex> lock(ctx->mu);
  Request* r = freeSlot(c);
  if (!r) {
    *out = nullptr;
    return 0;
  }
  r->comm = c;
  r->user = data;
  r->userSize = size;
  r->head = r->data = nullptr;
  r->headStatus = postRecv(ctx, r->buf, sizeof r->buf, ucxTag(c->id(), c->seq, kKindHead), &r->headInfo, &r->head);
  if (r->headStatus != UCS_OK && r->headStatus != UCS_INPROGRESS)
    return fail("ucx: posting a receive: %s", ucs_status_string(r->headStatus));
  // Posted now (not after the head arrives) so a large message lands in place at once;
  // cancelled when the head says the payload came packed.
  r->dataStatus = postRecv(ctx, data, size, ucxTag(c->id(), c->seq, kKindData), &r->dataInfo, &r->data);
  c->seq++;
  c->inflight++;
  r->state = ReqState::Live;
  if (r->dataStatus != UCS_OK && r->dataStatus != UCS_INPROGRESS && r->dataStatus != UCS_ERR_MESSAGE_TRUNCATED) {
    // This message's sequence number is spent: later ones could not line up again.
    c->epState->status.store(r->dataStatus);
    setFailed(r, "ucx: posting a receive: %s", ucs_status_string(r->dataStatus));
    return fail("%s", r->error.c_str());
  }
  *out = r;
  return 0;
}

int test(Request* r, int* done, size_t* size, uint64_t* tag) {
  Comm* c = r->comm;
  Context* ctx = c->ctx;
  std::lock_guard<std::mutex> lock(ctx->mu);
  *done = 0;
  if (r->state == ReqState::Failed) return fail("%s", r->error.c_str());
  if (r->state != ReqState::Live) return fail("ucx: test of a request that is not in flight (done already?)");
  ucp_worker_progress(ctx->worker);
  if (!ctx->closing.empty()) reapClosing(ctx);
  bool isSend = c->kind == CommKind::Send;
  auto advance = [&] { return isSend ? advanceSend(r) : advanceRecv(r, size, tag); };
  int st = advance();
  if (st == 0 && c->epState->status.load() != UCS_OK) {
    // Data that already arrived (perhaps on another socket than the error) still counts.
    progressUntil(ctx, [&] { return (st = advance()) != 0; }, kFailGraceSec);
    if (st == 0)
      st = setFailed(r, "ucx: connection to peer failed: %s",
                     ucs_status_string(ucs_status_t(c->epState->status.load())));
  }
  if (st < 0) return fail("%s", r->error.c_str());
  if (st == 1) {
    if (isSend && size) *size = r->size;
    *done = 1;
    release(r);
  }
  return 0;
}

int closeComm(Comm* c) {
  Context* ctx = c->ctx;
  int busy = 0;
  for (Request& r : c->reqs) {
    if (r.state == ReqState::Free) continue;
    busy++;
    cancel(ctx, r.head);
    cancel(ctx, r.data);
  }
  // An endpoint with requests in flight is dropped at once (UCX ends its sends as
  // cancelled); otherwise its close flushes what was sent, in the background.
  // One bound for the whole close, short after a failure (see kFailedCloseSec).
  const bool failed = busy > 0 || (c->epState && c->epState->status.load() != UCS_OK);
  const double deadline = nowSec() + (failed ? kFailedCloseSec : kCloseTimeoutSec);
  closeEndpoint(ctx, c, busy > 0, deadline);
  auto released = [&] {
    for (Request& r : c->reqs) {
      pollSend(r.head, r.headStatus);  // check_status + free suit sends and receives alike
      pollSend(r.data, r.dataStatus);
      if (r.head || r.data) return false;
    }
    return true;
  };
  int rc = 0;
  if (!progressUntil(ctx, released, std::max(0.0, deadline - nowSec()))) {
    // Leave them to UCX (freed when they finish); say so, since their memory is in use.
    for (Request& r : c->reqs) {
      if (r.head) ucp_request_free(r.head);
      if (r.data) ucp_request_free(r.data);
    }
    rc = fail("ucx: close: requests still in flight after %.1f s; UCX may still use their memory",
              failed ? kFailedCloseSec : kCloseTimeoutSec);
  }
  if (c->kind != CommKind::Send) ctx->ids.erase(c->id());
  ctx->comms.erase(c);
  c->kind = CommKind::Dead;
  delete c;
  return rc;
}

}  // namespace coll::net_ucx
