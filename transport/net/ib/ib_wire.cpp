// Validation of connection handles and replies that arrive from a peer, and the split of
// a zero-copy message over the queue pairs.
#include "transport/net/ib/ib_wire.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>

#include "base/error.hpp"

namespace coll::net::ib {

std::string checkConnInfo(const void* blob, uint32_t kind, ConnInfo* out) {
  const char* what = kind == kConnHandle ? "connection handle" : "connection reply";
  if (!blob) return strCat("the ", what, " is NULL");
  memcpy(out, blob, sizeof(*out));
  const ConnInfo& c = *out;
  if (c.magic != kConnMagic)
    return strCat("not an InfiniBand ", what, " (magic 0x", std::hex, c.magic, ", expected 0x",
                  kConnMagic, ")");
  if (c.version != kWireVersion)
    return strCat("the ", what, " has protocol version ", c.version, "; this build speaks ", kWireVersion);
  if (c.bytes != sizeof(ConnInfo))
    return strCat("the ", what, " is laid out in ", c.bytes, " bytes; this build uses ", sizeof(ConnInfo));
  if (c.kind != kind)
    return strCat("expected a ", what, ", got kind ", c.kind);
  if (c.nqps < 1 || c.nqps > kMaxQps)
    return strCat("the ", what, " names ", c.nqps, " queue pairs (1..", kMaxQps, " allowed)");
  for (uint32_t i = 0; i < c.nqps; ++i)
    if (c.qpn[i] == 0 || c.qpn[i] > 0xffffff || c.psn[i] > 0xffffff)
      return strCat("the ", what, " has an invalid QP number ", c.qpn[i], " or PSN ", c.psn[i]);
  if (c.mtu < IBV_MTU_256 || c.mtu > IBV_MTU_4096)
    return strCat("the ", what, " has an invalid MTU code ", int(c.mtu));
  if (c.linkLayer != IBV_LINK_LAYER_INFINIBAND && c.linkLayer != IBV_LINK_LAYER_ETHERNET)
    return strCat("the ", what, " has an unknown link layer ", int(c.linkLayer));
  if (c.chunk < kMinChunk || c.chunk > kMaxChunk || c.slots < 1 || c.slots > kMaxSlots)
    return strCat("the ", what, " has an invalid buffer shape: ", c.slots, " slots of ", c.chunk, " bytes");
  out->port[sizeof(out->port) - 1] = 0;
  return "";
}

void stripeOf(size_t len, uint32_t q, uint32_t nqps, size_t* lo, size_t* hi) {
  constexpr size_t kAlign = 4096;  // whole pages per stripe: no page is split between NIC queues
  size_t per = (len + nqps - 1) / nqps;
  per = (per + kAlign - 1) / kAlign * kAlign;
  *lo = std::min(len, per * q);
  *hi = std::min(len, *lo + per);
}

}  // namespace coll::net::ib
