// Validation of connection handles and replies that arrive from a peer.
#include "transport/net/ib/ib_wire.hpp"

#include <infiniband/verbs.h>

#include <cstring>

#include "core/error.hpp"

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
  if (c.qpn == 0 || c.qpn > 0xffffff || c.psn > 0xffffff)
    return strCat("the ", what, " has an invalid QP number ", c.qpn, " or PSN ", c.psn);
  if (c.mtu < IBV_MTU_256 || c.mtu > IBV_MTU_4096)
    return strCat("the ", what, " has an invalid MTU code ", int(c.mtu));
  if (c.linkLayer != IBV_LINK_LAYER_INFINIBAND && c.linkLayer != IBV_LINK_LAYER_ETHERNET)
    return strCat("the ", what, " has an unknown link layer ", int(c.linkLayer));
  if (c.chunk < kMinChunk || c.chunk > kMaxChunk || c.slots < 1 || c.slots > kMaxSlots)
    return strCat("the ", what, " has an invalid buffer shape: ", c.slots, " slots of ", c.chunk, " bytes");
  out->port[sizeof(out->port) - 1] = 0;
  return "";
}

}  // namespace coll::net::ib
