// What InfiniBand endpoints tell each other: the connection handle and reply (carried by
// the library's bootstrap) and the header in front of every message.
#pragma once

#include <cstdint>
#include <string>

#include "plugins/net/coll_net.h"

namespace coll::net::ib {

constexpr uint32_t kConnMagic = 0x31424943;  // "CIB1"
constexpr uint16_t kWireVersion = 1;
enum ConnKind : uint32_t { kConnHandle = 1, kConnReply = 2 };

// Bounce buffers: each piece of a message fills one slot of `chunk` bytes.
constexpr uint32_t kMinChunk = 64;
constexpr uint32_t kMaxChunk = 64u << 20;
constexpr uint32_t kMaxSlots = 4096;

// Both sides run the same build on one job, so the layout is the host's; `bytes` and
// `version` catch a mismatch anyway.
struct ConnInfo {
  uint32_t magic;
  uint16_t version;
  uint16_t bytes;  // sizeof(ConnInfo)
  uint32_t kind;   // ConnKind
  uint32_t qpn;
  uint32_t psn;    // the first packet sequence number this side sends
  uint32_t chunk;  // the receiver's slot size; the sender uses the same
  uint32_t slots;  // the receiver's slot count: the sender's initial credits
  uint16_t lid;
  uint8_t mtu;        // enum ibv_mtu of the port
  uint8_t linkLayer;  // IBV_LINK_LAYER_*
  uint8_t gid[16];
  // Random per connection: the reply must echo the handle's, so a receiver accepts
  // only the sender that got its handle.
  uint64_t token;
  char port[64];  // "mlx5_0:1", for messages
};
static_assert(sizeof(ConnInfo) <= COLL_NET_HANDLE_BYTES, "a handle holds a ConnInfo");

// In front of the first piece of every message.
struct MsgHeader {
  uint64_t size;
  uint64_t tag;
};
constexpr uint32_t kHeaderBytes = sizeof(MsgHeader);

// Copies a blob from the peer into *out; returns "" when it is a well-formed `kind`,
// else what is wrong with it.
std::string checkConnInfo(const void* blob, uint32_t kind, ConnInfo* out);

}  // namespace coll::net::ib
