// Response cache, control vector and wire encoding.
#include <gtest/gtest.h>

#include "engine/control.hpp"
#include "engine/fusion_policy.hpp"
#include "engine/response_cache.hpp"
#include "engine/wire.hpp"

namespace coll::engine {
namespace {

Response resp(const std::string& name, std::vector<int64_t> shape = {8}) {
  Response r;
  r.meta.name = name;
  r.meta.op = OpType::Allreduce;
  r.meta.shape = std::move(shape);
  return r;
}

TEST(ResponseCache, HitMissMismatch) {
  ResponseCache c(16, 0);
  EXPECT_EQ(c.lookup(resp("a").meta).kind, ResponseCache::Kind::Miss);
  c.insert(resp("a"));
  c.insert(resp("b"));
  auto l = c.lookup(resp("b").meta);
  EXPECT_EQ(l.kind, ResponseCache::Kind::Hit);
  EXPECT_EQ(l.slot, 1u);
  auto m = c.lookup(resp("b", {9}).meta);
  EXPECT_EQ(m.kind, ResponseCache::Kind::Mismatch);
  EXPECT_EQ(m.slot, 1u);
}

TEST(ResponseCache, SlotsReusedDeterministically) {
  ResponseCache x(16, 0), y(16, 1);
  for (auto* c : {&x, &y}) {
    c->insert(resp("a"));
    c->insert(resp("b"));
    c->insert(resp("c"));
    c->erase(1);
    c->insert(resp("d"));  // lowest free slot
  }
  EXPECT_EQ(*x.slotOf("d"), 1u);
  EXPECT_EQ(*y.slotOf("d"), 1u);
  EXPECT_EQ(x.slotCount(), 3u);
  x.erase(2);
  EXPECT_EQ(x.slotCount(), 2u);  // trailing free slots dropped
}

TEST(ResponseCache, CapacityAndUncacheable) {
  ResponseCache c(2, 0);
  c.insert(resp("a"));
  c.insert(resp("b"));
  c.insert(resp("c"));
  EXPECT_EQ(c.size(), 2u);
  EXPECT_FALSE(c.slotOf("c").has_value());
  ResponseCache d(8, 0);
  Response err = resp("e");
  err.error = true;
  d.insert(err);
  Response j = resp("j");
  j.meta.op = OpType::Join;
  d.insert(j);
  Response withJoined = resp("z");
  withJoined.joined = {1};
  d.insert(withJoined);
  EXPECT_EQ(d.size(), 0u);
}

// Each rank remembers the request it would send, including its own per-rank fields.
TEST(ResponseCache, PerRankExpectation) {
  Response r = resp("g", {3, 2});
  r.meta.op = OpType::Allgather;
  r.firstDims = {3, 5};
  ResponseCache c1(8, 1);
  c1.insert(r);
  RequestMeta mine = r.meta;
  mine.shape = {5, 2};
  EXPECT_EQ(c1.lookup(mine).kind, ResponseCache::Kind::Hit);
  mine.shape = {3, 2};
  EXPECT_EQ(c1.lookup(mine).kind, ResponseCache::Kind::Mismatch);
}

// Min over ranks: AND for "all pending", inverted flags for "any".
TEST(Control, MinCombinesAsAndAndOr) {
  LocalControl a, b;
  a.slots = {kSlotPending, kSlotPending, kSlotIdle, kSlotPending};
  a.held = {true, true, false, true};
  b.slots = {kSlotPending, kSlotIdle, kSlotIdle, kSlotInvalid};
  b.held = {true, false, false, false};
  a.hasUncached = false;
  b.hasUncached = true;
  a.wantsShutdown = false;
  b.wantsShutdown = false;
  auto va = encodeControl(a), vb = encodeControl(b);
  ASSERT_EQ(va.size(), vb.size());
  std::vector<uint8_t> m(va.size());
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::min(va[i], vb[i]);
  auto d = decodeControl(m);
  EXPECT_TRUE(d.slowPath);
  EXPECT_FALSE(d.shutdown);
  EXPECT_FALSE(d.abort);
  EXPECT_EQ(d.ready, (std::vector<uint32_t>{0}));
  EXPECT_EQ(d.invalidated, (std::vector<uint32_t>{3}));

  b.wantsShutdown = true;  // one rank's shutdown stops every rank
  b.hasUncached = false;
  b.slots = a.slots;
  b.held = {false, false, false, false};  // b stands in (joined) but holds nothing
  a.held = {true, false, false, true};
  b.abort = true;
  va = encodeControl(a);
  vb = encodeControl(b);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::min(va[i], vb[i]);
  d = decodeControl(m);
  EXPECT_FALSE(d.slowPath);
  EXPECT_TRUE(d.shutdown);
  EXPECT_TRUE(d.abort);
  EXPECT_EQ(d.ready, (std::vector<uint32_t>{0, 3}));  // slot 1: pending everywhere, held nowhere
}

// The direct threshold: the smallest proposal wins; a rank without one does not count.
TEST(Control, SmallestDirectThresholdWins) {
  LocalControl a, b;
  a.slots = b.slots = {kSlotIdle};
  a.held = b.held = {false};
  a.directLog2 = 16;
  b.directLog2 = 14;
  auto va = encodeControl(a), vb = encodeControl(b);
  std::vector<uint8_t> m(va.size());
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::min(va[i], vb[i]);
  EXPECT_EQ(decodeControl(m).directLog2, 14);
  b.directLog2 = kDirectUnknown;
  vb = encodeControl(b);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::min(va[i], vb[i]);
  EXPECT_EQ(decodeControl(m).directLog2, 16);
  EXPECT_EQ(decodeControl(encodeControl(b)).directLog2, kDirectUnknown);
}

TEST(Wire, RoundTripAndBounds) {
  RequestMeta m;
  m.name = "layer1.weight";
  m.op = OpType::Alltoall;
  m.dtype = collBfloat16;
  m.shape = {3, 4, 5};
  m.redOp = collMax;
  m.root = 2;
  m.prescale = 0.5;
  m.postscale = 3;
  m.compression.kind = CompressKind::Int8;
  m.compression.blockSize = 64;
  m.group = "grp";
  m.groupSize = 3;
  m.splits = {1, 2};
  m.ranks = {0, 3};
  RequestMeta n;
  n.name = "other";
  auto bytes = encodeRequests({m, n});
  auto back = decodeRequests(bytes.data(), bytes.size());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0], m);
  EXPECT_EQ(back[1], n);
  // Every truncation fails cleanly.
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_THROW(decodeRequests(bytes.data(), cut), Error) << cut;
  }
  auto bad = bytes;
  bad[0] ^= 0xff;
  EXPECT_THROW(decodeRequests(bad.data(), bad.size()), Error);
}

}  // namespace
}  // namespace coll::engine
