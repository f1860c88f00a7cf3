// Connection handles and replies of the UCX plugin: packing and the checks of a blob
// received from a peer (see ucx_wire.hpp).
#include "ucx_wire.hpp"

#include <cstdio>
#include <cstring>

namespace coll::net_ucx {

namespace {

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

uint64_t blobChecksum(const WireBlob& b) {
  uint64_t h = fnv1a(&b, offsetof(WireBlob, checksum), 1469598103934665603ull);
  size_t n = b.addrLen < sizeof b.address ? b.addrLen : sizeof b.address;
  return fnv1a(b.address, n, h);
}

void packBlob(uint32_t magic, uint64_t token, const void* addr, size_t addrLen, void* out) {
  WireBlob b;
  memset(&b, 0, sizeof b);
  b.magic = magic;
  b.version = kWireVersion;
  b.addrLen = uint16_t(addrLen);
  b.token = token;
  memcpy(b.address, addr, addrLen);
  b.checksum = blobChecksum(b);
  memcpy(out, &b, sizeof b);
}

int unpackBlob(const void* in, uint32_t magic, const char* what, WireBlob& b, char* err, size_t errLen) {
  memcpy(&b, in, sizeof b);
  if (b.magic != magic) {
    snprintf(err, errLen, "ucx: the %s is not from the UCX plugin (magic 0x%08x, expected 0x%08x)", what,
             unsigned(b.magic), unsigned(magic));
    return 1;
  }
  if (b.version != kWireVersion) {
    snprintf(err, errLen, "ucx: the %s has protocol version %u, this plugin speaks %u", what, unsigned(b.version),
             unsigned(kWireVersion));
    return 1;
  }
  if (b.addrLen == 0 || b.addrLen > sizeof b.address) {
    snprintf(err, errLen, "ucx: the %s holds a worker address of %u bytes (must be 1..%zu)", what,
             unsigned(b.addrLen), sizeof b.address);
    return 1;
  }
  if (b.checksum != blobChecksum(b)) {
    snprintf(err, errLen, "ucx: the %s is corrupt (checksum mismatch)", what);
    return 1;
  }
  if (b.token == 0) {
    snprintf(err, errLen, "ucx: the %s has no connection token", what);
    return 1;
  }
  return 0;
}

}  // namespace coll::net_ucx
