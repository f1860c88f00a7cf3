// The connection handshake (see handshake.hpp): its pieces, and the blocking client and
// server built from them.
#include "bootstrap/handshake.hpp"

#include <errno.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cstring>

#include "base/error.hpp"
#include "base/sha256.hpp"

namespace coll {

namespace hs {

void randomNonce(uint8_t* out) {
  size_t got = 0;
  while (got < kNonceBytes) {
    ssize_t k = getrandom(out + got, kNonceBytes - got, 0);
    if (k < 0 && errno == EINTR) continue;
    COLL_SYSCHECK(k, "getrandom for a handshake nonce");
    got += static_cast<size_t>(k);
  }
}

void putU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t getU32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

bool equalConstTime(const uint8_t* a, const uint8_t* b, size_t n) {
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

// MACs bind the secret to both nonces and to the direction, so neither message can be
// replayed in another connection or reflected back to its sender.
void clientMac(const uint8_t* secret, ConnRole role, const uint8_t* sn, const uint8_t* cn, uint8_t* out) {
  uint8_t buf[kSecretBytesHs + 6 + 4 + 2 * kNonceBytes];
  uint8_t* p = buf;
  memcpy(p, secret, kSecretBytesHs); p += kSecretBytesHs;
  memcpy(p, "client", 6); p += 6;
  putU32(p, static_cast<uint32_t>(role)); p += 4;
  memcpy(p, sn, kNonceBytes); p += kNonceBytes;
  memcpy(p, cn, kNonceBytes);
  sha256(buf, sizeof(buf), out);
}

void serverMac(const uint8_t* secret, const uint8_t* cn, const uint8_t* sn, uint8_t* out) {
  uint8_t buf[kSecretBytesHs + 6 + 2 * kNonceBytes];
  uint8_t* p = buf;
  memcpy(p, secret, kSecretBytesHs); p += kSecretBytesHs;
  memcpy(p, "server", 6); p += 6;
  memcpy(p, cn, kNonceBytes); p += kNonceBytes;
  memcpy(p, sn, kNonceBytes);
  sha256(buf, sizeof(buf), out);
}

void makeChallenge(const uint8_t* serverNonce, uint8_t* out) {
  putU32(out, kHsMagic);
  putU32(out + 4, kHsVersion);
  memcpy(out + 8, serverNonce, kNonceBytes);
}

bool checkClientHeader(const uint8_t* hdr, const uint8_t* secret, ConnRole role,
                       const uint8_t* serverNonce, size_t* helloLen, std::string* why) {
  uint32_t magic = getU32(hdr), version = getU32(hdr + 4), r = getU32(hdr + 8);
  if (magic != kHsMagic) { *why = strCat("bad magic 0x", std::hex, magic, " (not a libcollective peer)"); return false; }
  if (version != kHsVersion) { *why = strCat("protocol version ", version, ", expected ", kHsVersion); return false; }
  if (r != static_cast<uint32_t>(role)) {
    *why = strCat("connection role ", r, ", expected ", static_cast<uint32_t>(role));
    return false;
  }
  uint32_t len = getU32(hdr + 8 + 4 + kNonceBytes + 32);
  if (len > kMaxHello) { *why = strCat("hello of ", len, " bytes exceeds the limit of ", kMaxHello); return false; }
  uint8_t mac[32];
  clientMac(secret, role, serverNonce, hdr + 12, mac);
  if (!equalConstTime(mac, hdr + 12 + kNonceBytes, 32)) { *why = "wrong job secret (MAC mismatch)"; return false; }
  *helloLen = len;
  return true;
}

void makeServerProof(const uint8_t* secret, const uint8_t* hdr, const uint8_t* serverNonce, uint8_t* out) {
  serverMac(secret, hdr + 12, serverNonce, out);
}

void busyProof(uint8_t* out) {
  static const char kText[] = "libcollective: busy, try again.";  // 31 chars + NUL = 32
  static_assert(sizeof(kText) == kMacBytes, "the busy notice has the size of a proof");
  memcpy(out, kText, kMacBytes);
}

bool isBusyProof(const uint8_t* proof) {
  uint8_t b[kMacBytes];
  busyProof(b);
  return memcmp(b, proof, kMacBytes) == 0;
}

void sendBusy(int fd) {
  uint8_t sink[1024];
  for (size_t got = 0; got < kClientHeaderBytes + 4096;) {
    ssize_t k = ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (k <= 0) break;
    got += static_cast<size_t>(k);
  }
  uint8_t b[kMacBytes];
  busyProof(b);
  (void)!::send(fd, b, sizeof(b), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
}

ServerHandshake::Status ServerHandshake::fail(std::string why) {
  why_ = std::move(why);
  return Status::Failed;
}

ServerHandshake::Status ServerHandshake::start(int fd) {
  uint8_t ch[kChallengeBytes];
  randomNonce(nonce_);
  makeChallenge(nonce_, ch);
  ssize_t k = ::send(fd, ch, sizeof(ch), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k != static_cast<ssize_t>(sizeof(ch)))
    return fail(strCat("could not send the challenge: ", k < 0 ? sysErrorText(errno) : "short write"));
  return Status::InProgress;
}

ServerHandshake::Status ServerHandshake::step(int fd) {
  // Read only what the current stage needs, so no byte of a later message is consumed.
  while (true) {
    uint8_t* dst;
    size_t want;
    if (hdrGot_ < kClientHeaderBytes) {
      dst = hdr_ + hdrGot_;
      want = kClientHeaderBytes - hdrGot_;
    } else if (helloGot_ < helloLen_) {
      dst = hello_.data() + helloGot_;
      want = helloLen_ - helloGot_;
    } else {
      break;
    }
    ssize_t k = ::recv(fd, dst, want, MSG_DONTWAIT);
    if (k == 0) return fail("the peer closed the connection during the handshake");
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::InProgress;
      return fail(strCat("recv during the handshake: ", sysErrorText(errno)));
    }
    if (hdrGot_ < kClientHeaderBytes) {
      hdrGot_ += static_cast<size_t>(k);
      if (hdrGot_ == kClientHeaderBytes) {
        std::string why;
        if (!checkClientHeader(hdr_, secret_, role_, nonce_, &helloLen_, &why)) return fail(why);
        hello_.resize(helloLen_);
      }
    } else {
      helloGot_ += static_cast<size_t>(k);
    }
  }
  uint8_t proof[kMacBytes];
  makeServerProof(secret_, hdr_, nonce_, proof);
  ssize_t k = ::send(fd, proof, sizeof(proof), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k != static_cast<ssize_t>(sizeof(proof)))
    return fail(strCat("could not send the proof: ", k < 0 ? sysErrorText(errno) : "short write"));
  return Status::Done;
}

}  // namespace hs

void clientHandshake(int fd, const uint8_t* secret, ConnRole role, const void* hello, size_t helloLen,
                     const Deadline& deadline) {
  if (!clientHandshakeOrBusy(fd, secret, role, hello, helloLen, deadline))
    COLL_THROW(collRemoteError, "handshake with ", peerName(fd),
               ": the server dropped us to make room for newer connections (busy)");
}

bool clientHandshakeOrBusy(int fd, const uint8_t* secret, ConnRole role, const void* hello, size_t helloLen,
                           const Deadline& deadline) {
  COLL_CHECK_ARG(helloLen <= kMaxHello, "handshake hello of ", helloLen, " bytes exceeds kMaxHello = ", kMaxHello);
  const std::string peer = peerName(fd);  // while it is still connected, for the messages
  uint8_t ch[hs::kChallengeBytes];
  recvAll(fd, ch, sizeof(ch), deadline);
  uint32_t magic = hs::getU32(ch), version = hs::getU32(ch + 4);
  if (magic != hs::kHsMagic)
    COLL_THROW(collRemoteError, "handshake with ", peer, ": bad magic 0x", std::hex, magic,
               " (not a libcollective server)");
  if (version != hs::kHsVersion)
    COLL_THROW(collRemoteError, "handshake with ", peer, ": server speaks protocol version ",
               version, ", we speak ", hs::kHsVersion);
  std::vector<uint8_t> msg(hs::kClientHeaderBytes + helloLen);
  uint8_t* p = msg.data();
  hs::putU32(p, hs::kHsMagic);
  hs::putU32(p + 4, hs::kHsVersion);
  hs::putU32(p + 8, static_cast<uint32_t>(role));
  hs::randomNonce(p + 12);
  hs::clientMac(secret, role, ch + 8, p + 12, p + 12 + hs::kNonceBytes);
  hs::putU32(p + 12 + hs::kNonceBytes + 32, static_cast<uint32_t>(helloLen));
  if (helloLen) memcpy(p + hs::kClientHeaderBytes, hello, helloLen);
  sendAll(fd, msg.data(), msg.size(), deadline);
  uint8_t proof[32], expect[32];
  try {
    recvAll(fd, proof, sizeof(proof), deadline);
  } catch (const Error& e) {
    if (e.code() != collRemoteError) throw;
    COLL_THROW(collRemoteError, "handshake with ", peer,
               ": the server dropped us (a wrong job secret or connection role, or a server that stopped forming the job?): ", e.what());
  }
  if (hs::isBusyProof(proof)) return false;
  hs::serverMac(secret, p + 12, ch + 8, expect);
  if (!hs::equalConstTime(proof, expect, 32))
    COLL_THROW(collRemoteError, "handshake with ", peer, ": the server failed to prove the job secret");
  return true;
}

bool serverHandshake(int fd, const uint8_t* secret, ConnRole role, std::vector<uint8_t>* hello,
                     const Deadline& deadline, std::string* why) {
  try {
    uint8_t sn[hs::kNonceBytes], ch[hs::kChallengeBytes], hdr[hs::kClientHeaderBytes];
    hs::randomNonce(sn);
    hs::makeChallenge(sn, ch);
    sendAll(fd, ch, sizeof(ch), deadline);
    recvAll(fd, hdr, sizeof(hdr), deadline);
    size_t len = 0;
    if (!hs::checkClientHeader(hdr, secret, role, sn, &len, why)) return false;
    hello->resize(len);
    if (len) recvAll(fd, hello->data(), len, deadline);
    uint8_t proof[32];
    hs::makeServerProof(secret, hdr, sn, proof);
    sendAll(fd, proof, sizeof(proof), deadline);
    return true;
  } catch (const Error& e) {
    *why = e.what();
    return false;
  }
}

}  // namespace coll
