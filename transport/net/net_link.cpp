#include "transport/net/net_link.hpp"

#include "base/call_sig.hpp"
#include "base/error.hpp"

namespace coll::net {

NetLink::NetLink(int peerRank, const Backend* backend, int maxRequests, void* sendComm, void* recvComm)
    : peer_(peerRank), b_(backend), maxRequests_(maxRequests < 1 ? 1 : maxRequests), send_(sendComm),
      recv_(recvComm) {}

NetLink::~NetLink() { abandon(); }

void NetLink::abandon() {
  if (send_) b_->api->closeSend(send_);
  if (recv_) b_->api->closeRecv(recv_);
  send_ = recv_ = nullptr;
  sendQ_.clear();
  recvQ_.clear();
}

void NetLink::postSend(Xfer* x) {
  if (!send_) COLL_THROW(collInvalidUsage, "net: the link to rank ", peer_, " was closed after an earlier failure");
  sendQ_.push_back(Msg{x, nullptr, false});
}

void NetLink::postRecv(Xfer* x) {
  if (!recv_) COLL_THROW(collInvalidUsage, "net: the link to rank ", peer_, " was closed after an earlier failure");
  recvQ_.push_back(Msg{x, nullptr, false});
}

void NetLink::failed(collResult_t code, const char* what) const {
  COLL_THROW(code, "net (", b_->name, "): ", what, " with rank ", peer_, " failed: ", b_->lastError());
}

void NetLink::checkArrival(const Msg& m, size_t size, uint64_t tag) const {
  // The signature before the size: calls that differ usually differ in size too, and
  // this says how.
  if (tag != m.x->call && tag && m.x->call)
    COLL_THROW(collInvalidUsage, "net: ", callMismatchText(peer_, tag, -1, m.x->call));
  if (size != m.x->bytes)
    COLL_THROW(collRemoteError, "net: size mismatch on a message from rank ", peer_, ": the sender sent ", size,
               " bytes, this rank posted a receive of ", m.x->bytes, " bytes");
}

// Posts what the backend takes, then tests the posted messages; completed ones leave the
// front of the queue in order.
bool NetLink::advance(std::deque<Msg>& q, bool recv) {
  const auto& api = *b_->api;
  bool moved = false;
  int inFlight = 0;
  for (Msg& m : q) {
    if (!m.request) {
      if (inFlight >= maxRequests_) break;
      int rc = recv ? api.irecv(recv_, m.x->buf, m.x->bytes, &m.request)
                    : api.isend(send_, m.x->buf, m.x->bytes, m.x->call, &m.request);
      if (rc != 0) failed(collSystemError, recv ? "posting a receive" : "posting a send");
      if (!m.request) break;  // the backend is full for now
      moved = true;
    }
    ++inFlight;
    if (m.done) continue;
    int done = 0;
    size_t size = 0;
    uint64_t tag = 0;
    // The job must hear of it, since the peer may never notice (LinkError).
    if (api.test(m.request, &done, &size, &tag) != 0) {
      // Named with this rank's call: where the peer gave up first (its timeout closed
      // the connection), the two ranks' texts side by side still show both calls.
      std::string in = m.x->call ? " in this rank's " + describeCall(m.x->call) : std::string();
      throw LinkError(collRemoteError, strCat("net (", b_->name, "): ", recv ? "a receive" : "a send", " with rank ",
                                              peer_, in, " failed: ", b_->lastError()));
    }
    if (!done) continue;
    if (recv) checkArrival(m, size, tag);
    m.done = true;
    m.x->done = m.x->bytes;
    m.x->complete = true;
    moved = true;
  }
  while (!q.empty() && q.front().done) q.pop_front();
  return moved;
}

bool NetLink::progress() {
  bool moved = false;
  if (!sendQ_.empty()) moved |= advance(sendQ_, false);
  if (!recvQ_.empty()) moved |= advance(recvQ_, true);
  return moved;
}

}  // namespace coll::net
