#include "transport/tcp/tcp_link.hpp"

#include <errno.h>
#include <sys/socket.h>

#include <algorithm>

#include "base/call_sig.hpp"
#include "base/error.hpp"
#include "base/log.hpp"

namespace coll::tcp {
namespace {

// One syscall moves at most this many iovecs; small messages queued on a stream are
// batched up to it, so a burst of tiny sends costs one sendmsg, not one each.
constexpr size_t kMaxIov = 64;
// Bytes offered to one sendmsg/recvmsg. More than a socket buffer holds costs nothing (the
// call moves what fits) and saves a syscall per piece when pieces queue up on a stream.
constexpr size_t kMaxBatchBytes = size_t(16) << 20;

}  // namespace

TcpLink::TcpLink(int peerRank, std::vector<Socket> socks, size_t chunk)
    : peer_(peerRank), chunk_(chunk), socks_(std::move(socks)) {
  COLL_CHECK_ARG(!socks_.empty(), "TcpLink to rank ", peerRank, ": no stream sockets");
  COLL_CHECK_ARG(chunk_ > 0, "TcpLink to rank ", peerRank, ": chunk must be > 0");
  const int S = streams();
  sendCur_.resize(S);
  recvCur_.resize(S);
  stalled_.assign(static_cast<size_t>(S), 0);
  for (int s = 0; s < S; ++s) {
    sendCur_[s].piece = firstPieceOn(0, s, S);
    recvCur_[s].piece = firstPieceOn(0, s, S);
  }
  iov_.reserve(kMaxIov);
  pfds_.resize(S);
}

void TcpLink::post(Queue& q, Xfer* x) {
  COLL_CHECK_ARG(x != nullptr, "TcpLink to rank ", peer_, ": null Xfer");
  COLL_CHECK_ARG(x->buf != nullptr || x->bytes == 0, "TcpLink to rank ", peer_,
                 ": null buffer for ", x->bytes, " bytes");
  COLL_CHECK_ARG(x->bytes / chunk_ < UINT32_MAX, "TcpLink to rank ", peer_, ": ", x->bytes,
                 " bytes is too many pieces of ", chunk_);
  x->done = 0;
  x->complete = false;
  uint32_t n = pieceCount(x->bytes, chunk_);
  uint64_t seq = q.end();
  q.msgs.push_back(Msg{x, n, n, false,
                       WireHeader{kWireMagic, static_cast<uint32_t>(seq), uint64_t(x->bytes), x->call}});
}

void TcpLink::postSend(Xfer* x) { post(sendQ_, x); }
void TcpLink::postRecv(Xfer* x) { post(recvQ_, x); }

// The message and piece stream s carries next, skipping messages with no piece on s;
// nullptr when s has nothing posted.
TcpLink::Msg* TcpLink::current(Queue& q, Cursor& c, int s) {
  while (c.seq < q.end()) {
    if (c.seq >= q.base) {  // below base: completed, so no piece of it is left on s
      Msg& m = q.msgs[c.seq - q.base];
      if (c.piece < m.pieces) return &m;
    }
    ++c.seq;
    c.piece = firstPieceOn(c.seq, s, streams());
    c.off = 0;
  }
  return nullptr;
}

// Fills iov_ with the next bytes of stream s from cursor c (a copy): the rest of the
// current piece, then the following pieces on s. A receive stops
// before a piece whose message header has not been checked yet (its layout is unproven).
size_t TcpLink::gather(Queue& q, Cursor c, int s, bool recv) {
  iov_.clear();
  size_t total = 0;
  uint64_t headerSeqInBatch = UINT64_MAX;
  while (iov_.size() + 2 <= kMaxIov && total < kMaxBatchBytes) {
    Msg* m = current(q, c, s);
    if (!m) break;
    if (recv && c.piece != 0 && !m->agreed && headerSeqInBatch != c.seq) break;
    size_t hdrLen = c.piece == 0 ? sizeof(WireHeader) : 0;
    size_t dataLen = pieceLength(m->x->bytes, c.piece, chunk_);
    if (c.off < hdrLen) {
      iov_.push_back({reinterpret_cast<char*>(&m->hdr) + c.off, hdrLen - c.off});
      headerSeqInBatch = c.seq;
    }
    size_t dataOff = c.off > hdrLen ? c.off - hdrLen : 0;
    if (dataLen > dataOff) {
      char* base = static_cast<char*>(m->x->buf) + pieceOffset(c.piece, chunk_);
      iov_.push_back({base + dataOff, dataLen - dataOff});
    }
    total += hdrLen + dataLen - c.off;
    c.piece += static_cast<uint32_t>(streams());
    c.off = 0;
  }
  return total;
}

// With no receive posted, every earlier message has been read in full, so the next bytes
// on the stream of the next message's first piece are its header: peeked, not consumed.
uint64_t TcpLink::unclaimedCall() {
  if (!recvQ_.msgs.empty()) return 0;
  const uint64_t seq = recvQ_.end();
  WireHeader h;
  const ssize_t n = ::recv(socks_[pieceStream(seq, 0, streams())].fd(), &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(sizeof h) || h.magic != kWireMagic || h.seq != static_cast<uint32_t>(seq)) return 0;
  return h.call;
}

void TcpLink::checkHeader(const Msg& m, uint64_t seq) const {
  if (m.hdr.magic != kWireMagic)
    COLL_THROW(collRemoteError, "tcp: bad header from rank ", peer_, " for message ", seq,
               " (magic 0x", std::hex, m.hdr.magic, ", expected 0x", kWireMagic, ")");
  if (m.hdr.seq != static_cast<uint32_t>(seq))
    COLL_THROW(collRemoteError, "tcp: rank ", peer_, " sent message ", m.hdr.seq,
               " where this rank expected message ", static_cast<uint32_t>(seq));
  // Before the sizes: calls that differ usually differ in size too, and this says how.
  if (m.hdr.call != m.x->call && m.hdr.call && m.x->call)
    COLL_THROW(collInvalidUsage, "tcp: ", callMismatchText(peer_, m.hdr.call, -1, m.x->call));
  if (m.hdr.bytes != m.x->bytes)
    COLL_THROW(collRemoteError, "tcp: size mismatch on message ", seq, " from rank ", peer_,
               ": the sender sent ", m.hdr.bytes, " bytes, this rank posted a receive of ",
               m.x->bytes, " bytes");
}

// Accounts n bytes moved on stream s, walking the same pieces gather() listed.
void TcpLink::consume(Queue& q, Cursor& c, int s, size_t n, bool recv) {
  while (n > 0) {
    Msg* m = current(q, c, s);
    size_t hdrLen = c.piece == 0 ? sizeof(WireHeader) : 0;
    size_t len = hdrLen + pieceLength(m->x->bytes, c.piece, chunk_);
    size_t take = std::min(n, len - c.off);
    size_t before = c.off > hdrLen ? c.off : hdrLen;
    c.off += take;
    n -= take;
    if (c.off > hdrLen) m->x->done += c.off - before;
    if (recv && hdrLen && !m->agreed && c.off >= hdrLen) {
      try {
        checkHeader(*m, c.seq);
      } catch (const Error&) {
        failHeader(c.seq, s);
        return;  // held: stream s is stalled from here on
      }
      m->agreed = true;
    }
    if (c.off < len) break;
    c.piece += static_cast<uint32_t>(streams());
    c.off = 0;
    if (--m->left == 0) m->x->complete = true;
  }
}

void TcpLink::failHeader(uint64_t seq, int s) {
  bool earlierOpen = false;
  for (uint64_t k = recvQ_.base; k < seq && k < recvQ_.end(); ++k) earlierOpen |= recvQ_.msgs[k - recvQ_.base].left > 0;
  if (!earlierOpen) throw;  // the check's exception, being handled by the caller
  if (!heldError_ || seq < heldSeq_) {
    heldError_ = std::current_exception();
    heldSeq_ = seq;
  }
  stalled_[static_cast<size_t>(s)] = 1;
}

void TcpLink::popComplete(Queue& q) {
  while (!q.msgs.empty() && q.msgs.front().left == 0) {
    q.msgs.pop_front();
    ++q.base;
  }
}

void TcpLink::ioFailed(int err, const char* what) const {
  if (err == ECONNRESET || err == EPIPE || err == 0)
    COLL_THROW(collRemoteError, "tcp: peer rank ", peer_, " closed the connection (", what,
               err ? ": " + sysErrorText(err) : std::string(), ")");
  COLL_THROW(collSystemError, "tcp: ", what, " to/from rank ", peer_, ": ", sysErrorText(err));
}

bool TcpLink::sendOn(int s) {
  bool moved = false;
  for (;;) {
    size_t want = gather(sendQ_, sendCur_[s], s, false);
    if (want == 0) break;
    msghdr mh{};
    mh.msg_iov = iov_.data();
    mh.msg_iovlen = iov_.size();
    ssize_t n = sendmsg(socks_[s].fd(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      ioFailed(errno, "send");
    }
    consume(sendQ_, sendCur_[s], s, static_cast<size_t>(n), false);
    moved = true;
    if (static_cast<size_t>(n) < want) break;  // socket buffer full: EAGAIN would follow
  }
  return moved;
}

bool TcpLink::recvOn(int s) {
  bool moved = false;
  if (stalled_[static_cast<size_t>(s)]) return false;
  for (;;) {
    size_t want = gather(recvQ_, recvCur_[s], s, true);
    if (want == 0) break;
    msghdr mh{};
    mh.msg_iov = iov_.data();
    mh.msg_iovlen = iov_.size();
    ssize_t n = recvmsg(socks_[s].fd(), &mh, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      ioFailed(errno, "recv");
    }
    if (n == 0) ioFailed(0, "end of stream while receiving");
    consume(recvQ_, recvCur_[s], s, static_cast<size_t>(n), true);
    moved = true;
    if (static_cast<size_t>(n) < want) break;  // drained for now
  }
  return moved;
}

bool TcpLink::progress() {
  bool moved = false;
  const int S = streams();
  if (!sendQ_.msgs.empty()) {
    for (int s = 0; s < S; ++s) moved |= sendOn(s);
    popComplete(sendQ_);
  }
  if (!recvQ_.msgs.empty()) {
    for (int s = 0; s < S; ++s) moved |= recvOn(s);
    popComplete(recvQ_);
  }
  if (heldError_ && recvQ_.base >= heldSeq_) std::rethrow_exception(heldError_);
  return moved;
}

bool TcpLink::pending() const {
  auto open = [](const Queue& q) {
    return std::any_of(q.msgs.begin(), q.msgs.end(), [](const Msg& m) { return m.left > 0; });
  };
  return open(sendQ_) || open(recvQ_);
}

void TcpLink::waitActivity(int timeoutMs) {
  pfds_.clear();
  appendPollFds(&pfds_);
  int rc = poll(pfds_.data(), pfds_.size(), timeoutMs);
  if (rc < 0 && errno != EINTR) COLL_THROW(collSystemError, "tcp: poll: ", sysErrorText(errno));
}

bool TcpLink::appendPollFds(std::vector<pollfd>* fds) {
  const int S = streams();
  for (int s = 0; s < S; ++s) {
    short ev = 0;
    if (current(sendQ_, sendCur_[s], s)) ev |= POLLOUT;
    Cursor& c = recvCur_[s];
    if (Msg* m = current(recvQ_, c, s); m && (c.piece == 0 || m->agreed) && !stalled_[static_cast<size_t>(s)])
      ev |= POLLIN;
    // With no events poll still reports POLLERR/POLLHUP, so a dead peer wakes the waiter.
    fds->push_back(pollfd{socks_[s].fd(), ev, 0});
  }
  return true;
}

}  // namespace coll::tcp
