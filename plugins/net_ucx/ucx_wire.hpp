// The bytes the UCX plugin takes from a peer outside UCX itself: connection handles and
// replies. Pure functions (no UCX), so the checks can be unit-tested and fuzzed alone.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coll_net.h"

namespace coll::net_ucx {

// Handles and replies: a fixed header and a worker address, checksummed.
constexpr uint32_t kHandleMagic = 0x55435848;  // "UCXH"
constexpr uint32_t kReplyMagic = 0x55435852;   // "UCXR"
constexpr uint16_t kWireVersion = 1;
struct WireBlob {
  uint32_t magic;
  uint16_t version;
  uint16_t addrLen;
  uint64_t token;
  uint64_t checksum;  // FNV-1a of the fields above (checksum = 0) and address[0, addrLen)
  uint8_t address[COLL_NET_HANDLE_BYTES - 24];
};
static_assert(sizeof(WireBlob) == COLL_NET_HANDLE_BYTES, "a blob fills the handle exactly");

// FNV-1a over the header before `checksum` and address[0, min(addrLen, capacity)).
uint64_t blobChecksum(const WireBlob& b);

// Writes a blob of COLL_NET_HANDLE_BYTES to `out`; `addrLen` must be 1..sizeof address.
void packBlob(uint32_t magic, uint64_t token, const void* addr, size_t addrLen, void* out);

// Copies COLL_NET_HANDLE_BYTES from `in` into `b` and checks them (magic, version,
// address length, checksum, token); `what` names the blob in the message ("handle" or
// "reply"). Returns 0, or 1 with the reason in err[0, errLen).
int unpackBlob(const void* in, uint32_t magic, const char* what, WireBlob& b, char* err, size_t errLen);

}  // namespace coll::net_ucx
