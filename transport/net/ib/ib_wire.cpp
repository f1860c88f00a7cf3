// Validation of connection handles and replies that arrive from a peer, and the split of
// a zero-copy message over the queue pairs.
#include "transport/net/ib/ib_wire.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/error.hpp"

namespace coll::net::ib {

namespace {

std::string checkAddr(const char* what, uint32_t p, uint8_t mtu, uint8_t linkLayer) {
  if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096)
    return strCat("the ", what, " has an invalid MTU code ", int(mtu), p ? strCat(" for its port ", p) : "");
  if (linkLayer != IBV_LINK_LAYER_INFINIBAND && linkLayer != IBV_LINK_LAYER_ETHERNET)
    return strCat("the ", what, " has an unknown link layer ", int(linkLayer), p ? strCat(" for its port ", p) : "");
  return "";
}

// The ConnPorts after a well-formed ConnInfo `c`.
std::string checkPorts(const char* what, const uint8_t* blob, const ConnInfo& c, PeerPorts* out) {
  ConnPorts x;
  memcpy(&x, blob + sizeof(ConnInfo), sizeof(x));
  PeerPorts pp;
  pp.ports[0].lid = c.lid;
  pp.ports[0].mtu = c.mtu;
  pp.ports[0].linkLayer = c.linkLayer;
  memcpy(pp.ports[0].gid, c.gid, sizeof(c.gid));
  snprintf(pp.ports[0].port, sizeof(pp.ports[0].port), "%s", c.port);
  bool zero = true;
  for (size_t i = 0; i < sizeof(x); ++i) zero = zero && blob[sizeof(ConnInfo) + i] == 0;
  if (!zero) {
    if (x.magic != kPortsMagic)
      return strCat("the ", what, " has unknown bytes after its connection info (magic 0x", std::hex, x.magic,
                    ", expected 0x", kPortsMagic, " or none)");
    if (x.version != kPortsVersion)
      return strCat("the ", what, "'s port list has version ", x.version, "; this build speaks ", kPortsVersion);
    if (x.bytes != sizeof(ConnPorts))
      return strCat("the ", what, "'s port list is laid out in ", x.bytes, " bytes; this build uses ", sizeof(ConnPorts));
    if (x.nports < 2 || x.nports > kMaxPorts)
      return strCat("the ", what, " names ", x.nports, " ports (2..", kMaxPorts, " allowed in a port list)");
    for (uint32_t p = 1; p < x.nports; ++p) {
      const PortAddr& a = x.ports[p - 1];
      std::string bad = checkAddr(what, p, a.mtu, a.linkLayer);
      if (!bad.empty()) return bad;
      if (a.linkLayer != c.linkLayer)
        return strCat("the ", what, " mixes link layers across its ports (port ", p, ")");
      pp.ports[p] = a;
      pp.ports[p].port[sizeof(a.port) - 1] = 0;
    }
    std::vector<bool> used(x.nports);
    for (uint32_t q = 0; q < kMaxQps; ++q) {
      if (q < c.nqps && x.qpPort[q] >= x.nports)
        return strCat("the ", what, " puts queue pair ", q, " on port ", int(x.qpPort[q]), " of ", x.nports);
      if (q >= c.nqps && x.qpPort[q] != 0)
        return strCat("the ", what, " names a port for queue pair ", q, " of ", c.nqps);
      if (q < c.nqps) used[x.qpPort[q]] = true;
    }
    if (x.qpPort[0] != 0) return strCat("the ", what, " puts its first queue pair on port ", int(x.qpPort[0]));
    for (uint32_t p = 0; p < x.nports; ++p)
      if (!used[p]) return strCat("the ", what, " names port ", p, ", which carries none of its queue pairs");
    pp.nports = x.nports;
    memcpy(pp.qpPort, x.qpPort, sizeof(pp.qpPort));
  }
  if (out) *out = pp;
  return "";
}

}  // namespace

std::string checkConnInfo(const void* blob, uint32_t kind, ConnInfo* out, PeerPorts* ports) {
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
  std::string bad = checkAddr(what, 0, c.mtu, c.linkLayer);
  if (!bad.empty()) return bad;
  if (c.chunk < kMinChunk || c.chunk > kMaxChunk || c.slots < 1 || c.slots > kMaxSlots)
    return strCat("the ", what, " has an invalid buffer shape: ", c.slots, " slots of ", c.chunk, " bytes");
  out->port[sizeof(out->port) - 1] = 0;
  return checkPorts(what, static_cast<const uint8_t*>(blob), *out, ports);
}

void stripeOf(size_t len, uint32_t q, uint32_t nqps, size_t* lo, size_t* hi) {
  constexpr size_t kAlign = 4096;  // whole pages per stripe: no page is split between NIC queues
  size_t per = (len + nqps - 1) / nqps;
  per = (per + kAlign - 1) / kAlign * kAlign;
  *lo = std::min(len, per * q);
  *hi = std::min(len, *lo + per);
}

}  // namespace coll::net::ib
