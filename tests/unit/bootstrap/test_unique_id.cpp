#include <gtest/gtest.h>

#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "base/error.hpp"
#include "base/socket.hpp"
#include "test_util.hpp"
#include "base/sha256.hpp"

namespace coll {
namespace {

UniqueIdData sampleId() {
  UniqueIdData d;
  for (size_t i = 0; i < kSecretBytes; ++i) d.secret[i] = static_cast<uint8_t>(i * 7 + 1);
  d.root = parseAddr("10.1.2.3:4567");
  d.jobNonce = 0x1122334455667788ull;
  return d;
}

collResult_t decodeCode(const collUniqueId& id, std::string* msg) {
  try {
    UniqueIdData::decode(id);
    return collSuccess;
  } catch (const Error& e) {
    *msg = e.what();
    return e.code();
  }
}

TEST(UniqueId, RoundTripIPv4) {
  UniqueIdData d = sampleId();
  UniqueIdData back = UniqueIdData::decode(d.encode());
  EXPECT_EQ(back.magic, kIdMagic);
  EXPECT_EQ(back.version, kProtocolVersion);
  EXPECT_EQ(0, memcmp(back.secret, d.secret, kSecretBytes));
  EXPECT_EQ(addrToString(back.root), "10.1.2.3:4567");
  EXPECT_EQ(back.jobNonce, 0x1122334455667788ull);
}

TEST(UniqueId, RoundTripIPv6) {
  UniqueIdData d = sampleId();
  d.root = parseAddr("[fd00::1:2]:65535");
  UniqueIdData back = UniqueIdData::decode(d.encode());
  EXPECT_EQ(back.root.ss_family, AF_INET6);
  EXPECT_EQ(addrToString(back.root), "[fd00::1:2]:65535");
}

TEST(UniqueId, UnusedBytesAreZero) {
  collUniqueId id = sampleId().encode();
  for (size_t i = 76; i < sizeof(id.internal); ++i) ASSERT_EQ(id.internal[i], 0) << "byte " << i;
}

TEST(UniqueId, RejectsZeroedId) {
  collUniqueId id;
  memset(&id, 0, sizeof(id));
  std::string msg;
  EXPECT_EQ(decodeCode(id, &msg), collInvalidArgument);
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
}

TEST(UniqueId, RejectsOtherVersion) {
  UniqueIdData d = sampleId();
  d.version = kProtocolVersion + 1;
  std::string msg;
  EXPECT_EQ(decodeCode(d.encode(), &msg), collInvalidArgument);
  EXPECT_NE(msg.find("version"), std::string::npos) << msg;
}

TEST(UniqueId, RejectsEveryCorruptedByte) {
  collUniqueId good = sampleId().encode();
  for (size_t i = 0; i < 76; ++i) {
    collUniqueId bad = good;
    bad.internal[i] ^= 0x5a;
    std::string msg;
    EXPECT_EQ(decodeCode(bad, &msg), collInvalidArgument) << "flipped byte " << i;
  }
}

TEST(UniqueId, RejectsBadFamilyEvenWithValidChecksum) {
  // A family byte of 5 with a recomputed checksum: only the family check can catch it.
  collUniqueId id = sampleId().encode();
  id.internal[40] = 5;
  uint8_t d[32];
  sha256(id.internal, 72, d);
  memcpy(id.internal + 72, d, 4);
  std::string msg;
  EXPECT_EQ(decodeCode(id, &msg), collInvalidArgument);
  EXPECT_NE(msg.find("family"), std::string::npos) << msg;
}

TEST(UniqueId, EncodeRejectsUnsetRoot) {
  UniqueIdData d;
  EXPECT_THROW(d.encode(), Error);
}

TEST(UniqueId, RandomSecretsDiffer) {
  uint8_t a[kSecretBytes], b[kSecretBytes];
  randomSecret(a, sizeof(a));
  randomSecret(b, sizeof(b));
  EXPECT_NE(0, memcmp(a, b, sizeof(a)));
}

TEST(UniqueId, HostIdHonoursEnvironment) {
  setenv("COLL_HOST_ID", "rack7-node3", 1);
  EXPECT_EQ(localHostId(), "rack7-node3");
  unsetenv("COLL_HOST_ID");
  std::string id = localHostId();
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(id.rfind(host, 0), 0u) << id;
}

}  // namespace
}  // namespace coll
