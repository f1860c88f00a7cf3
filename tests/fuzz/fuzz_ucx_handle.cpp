// The UCX plugin's connection handles and replies from a peer: unpackBlob must refuse
// anything malformed, and a blob it accepts stays within its bounds and packs back into
// the same bytes.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ucx_wire.hpp"

using namespace coll::net_ucx;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  uint8_t blob[COLL_NET_HANDLE_BYTES] = {};
  memcpy(blob, data + 1, std::min(size - 1, sizeof blob));
  const uint32_t magic = data[0] & 1 ? kHandleMagic : kReplyMagic;
  WireBlob b;
  char err[256];
  if (unpackBlob(blob, magic, data[0] & 1 ? "handle" : "reply", b, err, sizeof err)) {
    if (!memchr(err, 0, sizeof err) || err[0] == 0) abort();  // a refusal gives a reason
    return 0;
  }
  if (b.magic != magic || b.version != kWireVersion || b.addrLen < 1 || b.addrLen > sizeof b.address ||
      b.token == 0)
    abort();  // accepted a blob out of bounds
  // Packing what was accepted gives the same header and address (the tail may differ).
  uint8_t again[COLL_NET_HANDLE_BYTES];
  packBlob(b.magic, b.token, b.address, b.addrLen, again);
  if (memcmp(again, blob, offsetof(WireBlob, address) + b.addrLen) != 0) abort();
  return 0;
}
