// collUniqueId layout (128 bytes, little-endian; the rest is zero):
//   [0,4) magic   [4,8) version   [8,40) secret   [40,42) family (4 or 6)   [42,44) port
//   [44,60) address (IPv4 in the first 4 bytes)   [60,64) IPv6 scope id   [64,72) job nonce
//   [72,76) check: the first 4 bytes of SHA-256 over [0,72)
// The check catches ids that were truncated or overwritten on the way to other ranks,
// which would otherwise show up as a confusing connect timeout.
#include <arpa/inet.h>
#include <errno.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/protocol.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "base/socket.hpp"
#include "base/sha256.hpp"

namespace coll {

COLL_PARAM(kHostIdParam, "COLL_HOST_ID", "", "identity of this host (default: hostname + boot id)");

namespace {
constexpr size_t kOffFamily = 40, kOffPort = 42, kOffAddr = 44, kOffScope = 60, kOffNonce = 64,
                 kOffCheck = 72;
}  // namespace

collUniqueId UniqueIdData::encode() const {
  collUniqueId id;
  memset(&id, 0, sizeof(id));
  bs::Writer w;
  w.u32(magic);
  w.u32(version);
  w.bytes(secret, kSecretBytes);
  uint8_t addr[16] = {};
  uint32_t scope = 0;
  uint16_t family = 0;
  if (root.ss_family == AF_INET) {
    family = 4;
    memcpy(addr, &reinterpret_cast<const sockaddr_in&>(root).sin_addr, 4);
  } else if (root.ss_family == AF_INET6) {
    family = 6;
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(root);
    memcpy(addr, &in6.sin6_addr, 16);
    scope = in6.sin6_scope_id;
  }
  COLL_CHECK_ARG(family != 0, "unique id: root address family ", root.ss_family, " is not IPv4/IPv6");
  uint16_t port = static_cast<uint16_t>(addrPort(root));
  const uint8_t famPort[4] = {static_cast<uint8_t>(family), 0, static_cast<uint8_t>(port & 0xff),
                              static_cast<uint8_t>(port >> 8)};
  w.bytes(famPort, 4);
  w.bytes(addr, 16);
  w.u32(scope);
  w.u64(jobNonce);
  std::vector<uint8_t>& b = w.data();
  uint8_t digest[32];
  sha256(b.data(), b.size(), digest);
  w.bytes(digest, 4);
  memcpy(id.internal, b.data(), b.size());
  return id;
}

UniqueIdData UniqueIdData::decode(const collUniqueId& id) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(id.internal);
  bs::Reader r(p, sizeof(id.internal), "unique id");
  UniqueIdData d;
  d.magic = r.u32();
  COLL_CHECK_ARG(d.magic == kIdMagic, "unique id: bad magic 0x", std::hex, d.magic, " (expected 0x",
                 kIdMagic, "): not an id made by collGetUniqueId, or not initialised");
  d.version = r.u32();
  COLL_CHECK_ARG(d.version == kProtocolVersion, "unique id: protocol version ", d.version,
                 ", this library speaks ", kProtocolVersion);
  uint8_t digest[32];
  sha256(p, kOffCheck, digest);
  COLL_CHECK_ARG(memcmp(digest, p + kOffCheck, 4) == 0,
                 "unique id: checksum mismatch (the id was corrupted on its way to this rank)");
  memcpy(d.secret, r.bytes(kSecretBytes), kSecretBytes);
  unsigned family = p[kOffFamily] | p[kOffFamily + 1] << 8;
  unsigned port = p[kOffPort] | p[kOffPort + 1] << 8;
  COLL_CHECK_ARG(family == 4 || family == 6, "unique id: address family ", family, " is not 4 or 6");
  COLL_CHECK_ARG(port != 0, "unique id: root port is 0");
  if (family == 4) {
    auto& in = reinterpret_cast<sockaddr_in&>(d.root);
    in.sin_family = AF_INET;
    memcpy(&in.sin_addr, p + kOffAddr, 4);
  } else {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(d.root);
    in6.sin6_family = AF_INET6;
    memcpy(&in6.sin6_addr, p + kOffAddr, 16);
    bs::Reader s(p + kOffScope, 4, "unique id");
    in6.sin6_scope_id = s.u32();
  }
  setAddrPort(&d.root, port);
  bs::Reader n(p + kOffNonce, 8, "unique id");
  d.jobNonce = n.u64();
  return d;
}

void randomSecret(uint8_t* secret, size_t bytes) {
  size_t got = 0;
  while (got < bytes) {
    ssize_t k = getrandom(secret + got, bytes - got, 0);
    if (k < 0 && errno == EINTR) continue;
    COLL_SYSCHECK(k, "getrandom for the job secret");
    got += static_cast<size_t>(k);
  }
}

std::string localHostId() { return localHostId(Config::fromEnv()); }

std::string localHostId(const Config& cfg) {
  if (cfg.isSet(kHostIdParam)) return cfg.getStr(kHostIdParam);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  // The boot id tells apart containers that share a hostname across machines, and a host
  // that rebooted in the middle of a long job's relaunch.
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  if (f) std::getline(f, boot);
  return boot.empty() ? std::string(host) : strCat(host, ":", boot);
}

}  // namespace coll
