// The UCX plugin's connection handles and replies: a packed blob comes back with the
// values put in; each kind of damage is refused with its own reason.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "ucx_wire.hpp"

using namespace coll::net_ucx;

namespace {

struct Packed {
  unsigned char bytes[COLL_NET_HANDLE_BYTES];
};

Packed packed(uint32_t magic = kHandleMagic, uint64_t token = 0x1234567890abcdefull, size_t len = 40) {
  unsigned char addr[sizeof(WireBlob::address)];
  for (size_t i = 0; i < sizeof addr; ++i) addr[i] = static_cast<unsigned char>(i * 7 + 3);
  Packed p;
  memset(p.bytes, 0xee, sizeof p.bytes);
  packBlob(magic, token, addr, len, p.bytes);
  return p;
}

std::string refusal(const Packed& p, uint32_t magic = kHandleMagic) {
  WireBlob b;
  char err[256] = "";
  if (!unpackBlob(p.bytes, magic, "handle", b, err, sizeof err)) return "";
  return err;
}

// Rewrites the checksum after a change so only the changed field is wrong.
void reseal(Packed& p) {
  WireBlob b;
  memcpy(&b, p.bytes, sizeof b);
  b.checksum = blobChecksum(b);
  memcpy(p.bytes, &b, sizeof b);
}

}  // namespace

TEST(UcxWire, RoundTripKeepsValues) {
  Packed p = packed(kReplyMagic, 77, 40);
  WireBlob b;
  char err[256] = "";
  ASSERT_EQ(unpackBlob(p.bytes, kReplyMagic, "reply", b, err, sizeof err), 0) << err;
  EXPECT_EQ(b.magic, kReplyMagic);
  EXPECT_EQ(b.version, kWireVersion);
  EXPECT_EQ(b.addrLen, 40u);
  EXPECT_EQ(b.token, 77u);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ(b.address[i], static_cast<unsigned char>(i * 7 + 3)) << i;
  EXPECT_EQ(b.address[40], 0u);  // the rest is zero, not left over
}

TEST(UcxWire, FullAddressFits) {
  EXPECT_EQ(refusal(packed(kHandleMagic, 1, sizeof(WireBlob::address))), "");
}

TEST(UcxWire, WrongMagicRefused) {
  EXPECT_NE(refusal(packed(kReplyMagic), kHandleMagic).find("not from the UCX plugin"), std::string::npos);
}

TEST(UcxWire, WrongVersionRefused) {
  Packed p = packed();
  WireBlob b;
  memcpy(&b, p.bytes, sizeof b);
  b.version = kWireVersion + 1;
  memcpy(p.bytes, &b, sizeof b);
  reseal(p);
  EXPECT_NE(refusal(p).find("protocol version 2"), std::string::npos) << refusal(p);
}

TEST(UcxWire, AddressLengthOutOfRangeRefused) {
  for (unsigned len : {0u, unsigned(sizeof(WireBlob::address)) + 1, 65535u}) {
    Packed p = packed();
    WireBlob b;
    memcpy(&b, p.bytes, sizeof b);
    b.addrLen = uint16_t(len);
    memcpy(p.bytes, &b, sizeof b);
    reseal(p);
    EXPECT_NE(refusal(p).find("worker address of " + std::to_string(len) + " bytes"), std::string::npos)
        << refusal(p);
  }
}

TEST(UcxWire, CorruptAddressRefused) {
  Packed p = packed();
  p.bytes[offsetof(WireBlob, address) + 5] ^= 1;
  EXPECT_NE(refusal(p).find("checksum mismatch"), std::string::npos);
}

TEST(UcxWire, ZeroTokenRefused) {
  EXPECT_NE(refusal(packed(kHandleMagic, 0)).find("no connection token"), std::string::npos);
}
