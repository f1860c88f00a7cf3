// The InfiniBand backend's wire: connection handles and replies from a peer
// (checkConnInfo must reject anything malformed and leave a well-formed one within its
// bounds) and the zero-copy striping of a message over the queue pairs the peer named
// (stripes in order, inside the message, covering it exactly). The port list after the
// ConnInfo (several ports per rank) must name a port in range for every queue pair.
#include <cstring>

#include "transport/net/ib/ib_wire.hpp"

using namespace coll::net::ib;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  uint8_t blob[COLL_NET_HANDLE_BYTES] = {};
  memcpy(blob, data + 1, std::min(size - 1, sizeof blob));
  const uint32_t kind = data[0] & 1 ? kConnHandle : kConnReply;
  ConnInfo c;
  PeerPorts where;
  std::string why = checkConnInfo(blob, kind, &c, &where);
  if (!why.empty()) return 0;
  if (where.nports < 1 || where.nports > kMaxPorts || where.qpPort[0] != 0) abort();
  for (uint32_t q = 0; q < kMaxQps; ++q)
    if ((q < c.nqps && where.qpPort[q] >= where.nports) || (q >= c.nqps && where.qpPort[q] != 0)) abort();
  for (uint32_t p = 0; p < where.nports; ++p)
    if (where.ports[p].port[sizeof where.ports[p].port - 1] != 0) abort();
  if (c.nqps < 1 || c.nqps > kMaxQps || c.chunk < kMinChunk || c.chunk > kMaxChunk || c.slots < 1 ||
      c.slots > kMaxSlots || c.port[sizeof c.port - 1] != 0)
    abort();  // accepted a handle out of bounds
  // A message of a size the input chose, striped over the peer's queue pairs.
  uint64_t len = 0;
  memcpy(&len, blob + sizeof blob - 8, 8);
  len %= uint64_t(1) << 40;
  size_t prev = 0;
  for (uint32_t q = 0; q < c.nqps; ++q) {
    size_t lo = 0, hi = 0;
    stripeOf(len, q, c.nqps, &lo, &hi);
    if (lo != prev || hi < lo || hi > len) abort();
    prev = hi;
  }
  if (prev != len) abort();
  return 0;
}
