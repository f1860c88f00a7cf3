// What InfiniBand endpoints tell each other: the connection handle and reply (carried by
// the library's bootstrap), the header in front of every message and the region a
// receiver offers for a zero-copy message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "plugins/net/coll_net.h"

namespace coll::net::ib {

constexpr uint32_t kConnMagic = 0x31424943;  // "CIB1"
constexpr uint16_t kWireVersion = 2;
enum ConnKind : uint32_t { kConnHandle = 1, kConnReply = 2 };

// Bounce buffers: each piece of a message fills one slot of `chunk` bytes.
constexpr uint32_t kMinChunk = 64;
constexpr uint32_t kMaxChunk = 64u << 20;
constexpr uint32_t kMaxSlots = 4096;
// Queue pairs per one-way connection (COLL_IB_QPS).
constexpr uint32_t kMaxQps = 16;

// Both sides run the same build on one job, so the layout is the host's; `bytes` and
// `version` catch a mismatch anyway.
struct ConnInfo {
  uint32_t magic;
  uint16_t version;
  uint16_t bytes;  // sizeof(ConnInfo)
  uint32_t kind;   // ConnKind
  uint32_t nqps;   // queue pairs of the connection; the handle's count is the connection's
  uint32_t qpn[kMaxQps];
  uint32_t psn[kMaxQps];  // the first packet sequence number this side sends on each
  uint32_t chunk;  // the receiver's slot size; the sender uses the same
  uint32_t slots;  // the receiver's slot count: the sender's initial credits
  // Messages of this many bytes or more move zero-copy (0: none). The handle says what
  // the receiver allows; the reply what the sender will do, which both then follow.
  uint64_t zcopyMin;
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

// In front of every message, in the first slot it fills. An eager message's payload
// follows in the slots; a zero-copy one's header is alone (a request to send) and its
// payload arrives by RDMA writes into the region the receiver offers.
enum MsgKind : uint32_t { kMsgEager = 1, kMsgZcopy = 2 };
struct MsgHeader {
  uint64_t size;
  uint64_t tag;
  uint32_t kind;  // MsgKind
  uint32_t seq;   // the message's number on its connection, from 0
};
constexpr uint32_t kHeaderBytes = sizeof(MsgHeader);

// The region a receiver offers for message `seq` (clear to send), sent back on the
// connection's first queue pair. The sender writes min(its size, len) bytes there.
constexpr uint32_t kCtsMagic = 0x43545331;  // "CTS1"
enum CtsStatus : uint32_t { kCtsOk = 0, kCtsRegFailed = 1 };
struct Cts {
  uint32_t magic;
  uint32_t seq;
  uint64_t addr;
  uint64_t len;
  uint32_t rkey;
  uint32_t status;  // CtsStatus: kCtsRegFailed when the receiver could not register
};
// Control messages (a Cts, or a credit return with no payload) land in entries of this size.
constexpr uint32_t kCtrlBytes = 64;
static_assert(sizeof(Cts) <= kCtrlBytes, "a control entry holds a Cts");

// Copies a blob from the peer into *out; returns "" when it is a well-formed `kind`,
// else what is wrong with it.
std::string checkConnInfo(const void* blob, uint32_t kind, ConnInfo* out);

// The bytes [*lo, *hi) of a zero-copy message of `len` bytes that queue pair q of nqps
// writes: equal page-aligned stripes, the last ones short or empty. Every queue pair
// ends its stripe (even an empty one) with a write with immediate, so the receiver
// counts exactly nqps of them per message.
void stripeOf(size_t len, uint32_t q, uint32_t nqps, size_t* lo, size_t* hi);

}  // namespace coll::net::ib
