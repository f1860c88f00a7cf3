#include "bootstrap/protocol.hpp"

#include <errno.h>
#include <sys/socket.h>

#include <cstring>

#include "base/error.hpp"

namespace coll::bs {

size_t maxPayload(MsgType type, int nranks) {
  size_t n = nranks > 0 ? static_cast<size_t>(nranks) : 1;
  switch (type) {
    case MsgType::Welcome: return 4 + n * (4 + 2 * (4 + kMaxName));
    case MsgType::Contribute: return 4 + kMaxBlob;
    case MsgType::Result: return n * kMaxBlob;
    case MsgType::Failure:
    case MsgType::Error: return 4 + 4 + kMaxText;
    case MsgType::Abort: return 4 + kMaxText;
    case MsgType::Goodbye: return 0;
    case MsgType::Waiting: return 4 + kMaxText;
  }
  return 0;
}

bool knownType(uint32_t t) {
  return t >= static_cast<uint32_t>(MsgType::Welcome) && t <= static_cast<uint32_t>(MsgType::Waiting);
}

void Writer::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Writer::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Writer::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  bytes(s.data(), s.size());
}

void Writer::bytes(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  buf_.insert(buf_.end(), b, b + n);
}

void Reader::need(size_t n) {
  if (n > n_ - off_)
    COLL_THROW(collRemoteError, "malformed ", what_, ": needs ", n, " more bytes at offset ", off_,
               " of ", n_);
}

uint32_t Reader::u32() {
  need(4);
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(p_[off_ + i]) << (8 * i);
  off_ += 4;
  return v;
}

uint64_t Reader::u64() {
  need(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p_[off_ + i]) << (8 * i);
  off_ += 8;
  return v;
}

std::string Reader::str(size_t maxLen) {
  uint32_t len = u32();
  if (len > maxLen)
    COLL_THROW(collRemoteError, "malformed ", what_, ": string of ", len, " bytes exceeds ", maxLen);
  const uint8_t* b = bytes(len);
  return std::string(reinterpret_cast<const char*>(b), len);
}

const uint8_t* Reader::bytes(size_t n) {
  need(n);
  const uint8_t* b = p_ + off_;
  off_ += n;
  return b;
}

std::vector<uint8_t> makeFrame(MsgType type, const void* payload, size_t n) {
  Writer w;
  w.u32(static_cast<uint32_t>(type));
  w.u64(n);
  if (n) w.bytes(payload, n);
  return std::move(w.data());
}

FrameReader::Status FrameReader::read(int fd, int nranks) {
  while (true) {
    uint8_t* dst;
    size_t want;
    if (!haveHeader_) {
      dst = hdr_ + hdrGot_;
      want = kFrameHeader - hdrGot_;
    } else if (got_ < payload_.size()) {
      dst = payload_.data() + got_;
      want = payload_.size() - got_;
    } else {
      return Status::Complete;
    }
    ssize_t k = ::recv(fd, dst, want, MSG_DONTWAIT);
    if (k == 0) return Status::Closed;
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Again;
      why_ = sysErrorText(errno);
      return Status::Closed;
    }
    if (haveHeader_) { got_ += static_cast<size_t>(k); continue; }
    hdrGot_ += static_cast<size_t>(k);
    if (hdrGot_ < kFrameHeader) continue;
    Reader r(hdr_, kFrameHeader, "frame header");
    uint32_t t = r.u32();
    uint64_t len = r.u64();
    if (!knownType(t)) { why_ = strCat("unknown message type ", t); return Status::Bad; }
    type_ = static_cast<MsgType>(t);
    size_t limit = maxPayload(type_, nranks);
    if (len > limit) {
      why_ = strCat("message type ", t, " of ", len, " bytes exceeds the limit of ", limit);
      return Status::Bad;
    }
    payload_.resize(static_cast<size_t>(len));
    got_ = 0;
    haveHeader_ = true;
  }
}

void FrameReader::reset() {
  hdrGot_ = 0;
  haveHeader_ = false;
  payload_.clear();
  got_ = 0;
}

void OutQueue::push(std::shared_ptr<const std::vector<uint8_t>> frame) { q_.push_back(std::move(frame)); }

bool OutQueue::flush(int fd, std::string* why) {
  while (!q_.empty()) {
    const auto& f = *q_.front();
    ssize_t k = ::send(fd, f.data() + off_, f.size() - off_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      *why = sysErrorText(errno);
      return false;
    }
    off_ += static_cast<size_t>(k);
    if (off_ == f.size()) { q_.pop_front(); off_ = 0; }
  }
  return true;
}

std::vector<uint8_t> encodeHello(const RankHello& h) {
  Writer w;
  w.u32(static_cast<uint32_t>(h.rank));
  w.u32(static_cast<uint32_t>(h.nranks));
  w.u32(static_cast<uint32_t>(h.info.pid));
  // Bound the strings so the whole hello always fits kMaxHello.
  w.str(h.info.hostId.substr(0, kMaxName));
  w.str(h.info.hostname.substr(0, kMaxName));
  return std::move(w.data());
}

RankHello decodeHello(const std::vector<uint8_t>& data) {
  Reader r(data.data(), data.size(), "hello");
  RankHello h;
  h.rank = static_cast<int>(r.u32());
  h.nranks = static_cast<int>(r.u32());
  h.info.pid = static_cast<int>(r.u32());
  h.info.hostId = r.str(kMaxName);
  h.info.hostname = r.str(kMaxName);
  if (r.left()) COLL_THROW(collRemoteError, "malformed hello: ", r.left(), " trailing bytes");
  return h;
}

std::vector<uint8_t> encodePeers(const std::vector<PeerInfo>& peers) {
  Writer w;
  w.u32(static_cast<uint32_t>(peers.size()));
  for (const auto& p : peers) {
    w.u32(static_cast<uint32_t>(p.pid));
    w.str(p.hostId);
    w.str(p.hostname);
  }
  return std::move(w.data());
}

std::vector<PeerInfo> decodePeers(const uint8_t* p, size_t n, int nranks) {
  Reader r(p, n, "peer table");
  uint32_t count = r.u32();
  if (count != static_cast<uint32_t>(nranks))
    COLL_THROW(collRemoteError, "peer table lists ", count, " ranks, expected nranks = ", nranks);
  std::vector<PeerInfo> out(count);
  for (auto& info : out) {
    info.pid = static_cast<int>(r.u32());
    info.hostId = r.str(kMaxName);
    info.hostname = r.str(kMaxName);
  }
  return out;
}

std::string describeRank(int rank, const PeerInfo& info) {
  return strCat("rank ", rank, " (host ", info.hostname.empty() ? "?" : info.hostname, ", pid ",
                info.pid, ")");
}

}  // namespace coll::bs
