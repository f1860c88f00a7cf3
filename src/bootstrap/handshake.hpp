// The wire format of the connection handshake (clientHandshake / serverHandshake below),
// in pieces, so that a server multiplexing many connections (the rendezvous root) can run
// it without blocking on any one of them. handshake.cpp builds the blocking
// clientHandshake / serverHandshake from the same pieces, so the two cannot drift.
//
//   server -> client  challenge : magic u32 | version u32 | server nonce[16]          (24 B)
//   client -> server  header    : magic u32 | version u32 | role u32 | client nonce[16]
//                                 | MAC[32] | hello length u32                         (64 B)
//                     hello     : hello length bytes (<= kMaxHello)
//   server -> client  proof     : SHA256(secret | "server" | client nonce | server nonce)
//   MAC = SHA256(secret | "client" | role u32 | server nonce | client nonce)
// Integers are little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "base/socket.hpp"

namespace coll::hs {

constexpr uint32_t kHsMagic = kIdMagic;
constexpr uint32_t kHsVersion = kProtocolVersion;
constexpr size_t kSecretBytesHs = kSecretBytes;
constexpr size_t kNonceBytes = 16;
constexpr size_t kMacBytes = 32;
constexpr size_t kChallengeBytes = 8 + kNonceBytes;
constexpr size_t kClientHeaderBytes = 12 + kNonceBytes + kMacBytes + 4;

void randomNonce(uint8_t* out);
void putU32(uint8_t* p, uint32_t v);
uint32_t getU32(const uint8_t* p);
bool equalConstTime(const uint8_t* a, const uint8_t* b, size_t n);
void clientMac(const uint8_t* secret, ConnRole role, const uint8_t* serverNonce,
               const uint8_t* clientNonce, uint8_t* out);
void serverMac(const uint8_t* secret, const uint8_t* clientNonce, const uint8_t* serverNonce,
               uint8_t* out);
void makeChallenge(const uint8_t* serverNonce, uint8_t* out);
// Validates a client header (magic, version, role, hello bound, MAC). On success sets
// *helloLen; on failure says why.
bool checkClientHeader(const uint8_t* hdr, const uint8_t* secret, ConnRole role,
                       const uint8_t* serverNonce, size_t* helloLen, std::string* why);
void makeServerProof(const uint8_t* secret, const uint8_t* hdr, const uint8_t* serverNonce,
                     uint8_t* out);

// What a server sends instead of its proof when it drops an unproven connection to make
// room for newer ones (a flood of strangers): the client connects again. Any other drop
// (a wrong secret, role or version) closes without it, and the client gives up at once.
void busyProof(uint8_t* out);
bool isBusyProof(const uint8_t* proof);
// Drains what the peer already sent (so the close does not reset the connection before
// the notice is read) and sends the busy notice. Best effort, never blocks.
void sendBusy(int fd);

// Server side of the handshake as a state machine over a non-blocking socket: call
// start() once, then step() whenever the socket is readable.
class ServerHandshake {
 public:
  enum class Status { InProgress, Done, Failed };
  ServerHandshake(const uint8_t* secret, ConnRole role) : secret_(secret), role_(role) {}
  // Sends the challenge (24 bytes always fit an empty socket buffer).
  Status start(int fd);
  // Reads what is available; on Done the hello is in hello(), on Failed why() says why.
  Status step(int fd);
  const std::vector<uint8_t>& hello() const { return hello_; }
  const std::string& why() const { return why_; }

 private:
  Status fail(std::string why);
  const uint8_t* secret_;
  ConnRole role_;
  uint8_t nonce_[kNonceBytes] = {};
  uint8_t hdr_[kClientHeaderBytes] = {};
  size_t hdrGot_ = 0;
  size_t helloLen_ = 0;
  size_t helloGot_ = 0;
  std::vector<uint8_t> hello_;
  std::string why_;
};

}  // namespace coll::hs

namespace coll {

// Handshake. The server sends a challenge; the client answers with magic, protocol
// version, role and a MAC over the job secret and both nonces, followed by a small hello
// payload (at most kMaxHello bytes); the server proves the secret back. Either side
// throws collRemoteError (client) or returns false (server) on any mismatch, so a stray
// or hostile connection is dropped without touching the job.
void clientHandshake(int fd, const uint8_t* secret, ConnRole role, const void* hello,
                     size_t helloLen, const Deadline& deadline);
// The same, but returns false when the server dropped this connection as busy (too many
// unproven connections at once): the caller connects again while its deadline allows.
bool clientHandshakeOrBusy(int fd, const uint8_t* secret, ConnRole role, const void* hello,
                           size_t helloLen, const Deadline& deadline);
// On success fills *hello. On failure returns false and sets *why for the warning.
bool serverHandshake(int fd, const uint8_t* secret, ConnRole role, std::vector<uint8_t>* hello,
                     const Deadline& deadline, std::string* why);

}  // namespace coll
