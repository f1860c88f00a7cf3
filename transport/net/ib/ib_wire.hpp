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
// Queue pairs per one-way connection (COLL_IB_QPS x COLL_IB_PORTS).
constexpr uint32_t kMaxQps = 16;
// Ports one side of a connection spreads its queue pairs over (COLL_IB_PORTS).
constexpr uint32_t kMaxPorts = 4;

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

// A side whose queue pairs sit on more than one port (COLL_IB_PORTS > 1) follows its
// ConnInfo with this, in the same handle or reply. ConnInfo's lid, gid, mtu, linkLayer
// and port are then its first port's. A side on one port leaves these bytes zero, so a
// single-port handle is the same bytes as before ports were added.
constexpr uint32_t kPortsMagic = 0x50424943;  // "CIBP"
constexpr uint16_t kPortsVersion = 1;
struct PortAddr {
  uint16_t lid;
  uint8_t mtu;        // enum ibv_mtu
  uint8_t linkLayer;  // IBV_LINK_LAYER_*
  uint8_t gid[16];
  char port[28];      // "mlx5_1:1", for messages
};
struct ConnPorts {
  uint32_t magic;
  uint16_t version;
  uint16_t bytes;      // sizeof(ConnPorts)
  uint32_t nports;     // 2..kMaxPorts
  uint8_t qpPort[kMaxQps];           // the port (index into ports, 0: ConnInfo's) of each queue pair
  PortAddr ports[kMaxPorts - 1];     // ports 1..nports-1
};
static_assert(sizeof(ConnInfo) + sizeof(ConnPorts) <= COLL_NET_HANDLE_BYTES, "a handle holds both");

// Where one side's queue pairs are: a port per queue pair and the ports' addresses
// (port 0 is ConnInfo's own). Single-port sides have nports 1 and every qpPort 0.
struct PeerPorts {
  uint32_t nports = 1;
  uint8_t qpPort[kMaxQps] = {};
  PortAddr ports[kMaxPorts] = {};
};

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
// A receiver whose queue pairs sit on ports of more than one device registers its buffer
// on each (each device has its own protection domain and keys) and sends this longer
// region instead: rkeys[p] is the key for writes that arrive on its port p (rkeys[0] ==
// base.rkey). Its length tells the two apart; single-device receivers send a plain Cts.
struct CtsPorts {
  Cts base;
  uint32_t rkeys[kMaxPorts];
};
// Control messages (a Cts, or a credit return with no payload) land in entries of this size.
constexpr uint32_t kCtrlBytes = 64;
static_assert(sizeof(CtsPorts) <= kCtrlBytes, "a control entry holds a region");

// Copies a blob from the peer into *out; returns "" when it is a well-formed `kind`,
// else what is wrong with it.
// `blob` is COLL_NET_HANDLE_BYTES long. *ports (optional) gets where the peer's queue
// pairs are: a ConnPorts after the ConnInfo must be well-formed and name every queue
// pair's port, or be all zero (a single-port peer).
std::string checkConnInfo(const void* blob, uint32_t kind, ConnInfo* out, PeerPorts* ports = nullptr);

// The bytes [*lo, *hi) of a zero-copy message of `len` bytes that queue pair q of nqps
// writes: equal page-aligned stripes, the last ones short or empty. Every queue pair
// ends its stripe (even an empty one) with a write with immediate, so the receiver
// counts exactly nqps of them per message.
void stripeOf(size_t len, uint32_t q, uint32_t nqps, size_t* lo, size_t* hi);

}  // namespace coll::net::ib
