// Handshake pieces (see handshake.hpp) and SHA-256, written from FIPS 180-4.
#include "bootstrap/handshake.hpp"

#include <errno.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cstring>

#include "core/error.hpp"

namespace coll {

namespace {

constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void compress(uint32_t h[8], const uint8_t block[64]) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = uint32_t(block[4 * i]) << 24 | uint32_t(block[4 * i + 1]) << 16 |
           uint32_t(block[4 * i + 2]) << 8 | uint32_t(block[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

}  // namespace

void sha256(const void* data, size_t n, uint8_t out[32]) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t left = n;
  for (; left >= 64; left -= 64, p += 64) compress(h, p);
  // Padding: a 1 bit, zeros, then the message length in bits (big-endian), to a block edge.
  uint8_t tail[128] = {};
  memcpy(tail, p, left);
  tail[left] = 0x80;
  size_t tailLen = left + 9 <= 64 ? 64 : 128;
  uint64_t bits = static_cast<uint64_t>(n) * 8;
  for (int i = 0; i < 8; ++i) tail[tailLen - 1 - i] = static_cast<uint8_t>(bits >> (8 * i));
  compress(h, tail);
  if (tailLen == 128) compress(h, tail + 64);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(h[i] >> (24 - 8 * j));
}

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
}  // namespace coll
