// The negotiation state machine with simulated ranks: every rank's messages are fed in,
// the decisions must not depend on the order ranks submitted in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/negotiation.hpp"

namespace coll::engine {
namespace {

RequestMeta ar(const std::string& name, std::vector<int64_t> shape = {4}, collDataType_t dt = collFloat32) {
  RequestMeta m;
  m.name = name;
  m.op = OpType::Allreduce;
  m.dtype = dt;
  m.shape = std::move(shape);
  m.redOp = collSum;
  return m;
}

std::vector<std::string> names(const std::vector<Response>& rs) {
  std::vector<std::string> out;
  for (const auto& r : rs) out.push_back(r.name());
  return out;
}

TEST(Negotiation, ReadyOnlyWhenEveryRankSubmitted) {
  Negotiator n(3);
  n.addRound({{ar("a")}, {ar("a")}, {}}, 0);
  EXPECT_TRUE(n.takeReady().empty());
  EXPECT_EQ(n.pendingCount(), 1u);
  n.addRound({{}, {}, {ar("a")}}, 1);
  auto r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].name(), "a");
  EXPECT_FALSE(r[0].error);
  EXPECT_EQ(n.pendingCount(), 0u);
}

// Two replicas fed the same rounds decide the same sequence, whatever order each rank
// submitted its tensors in (that is what lets every rank run the same collectives).
TEST(Negotiation, SameDecisionsOnEveryReplicaWhateverTheSubmissionOrder) {
  const int ranks = 4;
  std::vector<std::string> all;
  for (int i = 0; i < 40; ++i) all.push_back("t" + std::to_string(i));
  std::mt19937 rng(7);
  std::vector<std::vector<std::string>> order(ranks, all);
  for (auto& o : order) std::shuffle(o.begin(), o.end(), rng);
  Negotiator a(ranks), b(ranks);
  std::vector<std::string> decidedA, decidedB;
  // Each round every rank sends its next 3 tensors.
  for (size_t at = 0; at < all.size(); at += 3) {
    std::vector<std::vector<RequestMeta>> msgs(ranks);
    for (int r = 0; r < ranks; ++r)
      for (size_t i = at; i < std::min(all.size(), at + 3); ++i) msgs[r].push_back(ar(order[r][i]));
    a.addRound(msgs, 0);
    b.addRound(msgs, 0);
    for (auto& s : names(a.takeReady())) decidedA.push_back(s);
    for (auto& s : names(b.takeReady())) decidedB.push_back(s);
  }
  EXPECT_EQ(decidedA, decidedB);
  auto sorted = decidedA;
  std::sort(sorted.begin(), sorted.end());
  auto expect = all;
  std::sort(expect.begin(), expect.end());
  EXPECT_EQ(sorted, expect);  // each exactly once
}

TEST(Negotiation, ShapeMismatchNamesTensorAndRanks) {
  Negotiator n(3);
  n.addRound({{ar("w", {3, 4})}, {ar("w", {4, 3})}, {ar("w", {3, 4})}}, 0);
  auto r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error);
  EXPECT_EQ(r[0].errorCode, collInvalidUsage);
  EXPECT_NE(r[0].errorMessage.find("'w'"), std::string::npos) << r[0].errorMessage;
  EXPECT_NE(r[0].errorMessage.find("shape"), std::string::npos) << r[0].errorMessage;
  EXPECT_NE(r[0].errorMessage.find("ranks 0,2 submitted [3,4]"), std::string::npos) << r[0].errorMessage;
  EXPECT_NE(r[0].errorMessage.find("rank 1 submitted [4,3]"), std::string::npos) << r[0].errorMessage;
}

TEST(Negotiation, TypeAndOpMismatches) {
  Negotiator n(2);
  n.addRound({{ar("x", {4}, collFloat32)}, {ar("x", {4}, collInt32)}}, 0);
  auto r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error);
  EXPECT_NE(r[0].errorMessage.find("dtype"), std::string::npos) << r[0].errorMessage;

  RequestMeta mx = ar("y");
  mx.redOp = collMax;
  n.addRound({{ar("y")}, {mx}}, 0);
  r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].errorMessage.find("reduce op"), std::string::npos) << r[0].errorMessage;

  RequestMeta bc = ar("z");
  bc.op = OpType::Broadcast;
  n.addRound({{ar("z")}, {bc}}, 0);
  r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].errorMessage.find("operation"), std::string::npos) << r[0].errorMessage;
}

// Scale factors (and top-k density) used to be compared as text with six digits: ranks asking
// for 1e-7 and 2e-7 passed as agreeing, and every rank silently used rank 0's factor.
TEST(Negotiation, ScaleFactorsAndDensityMustAgreeExactly) {
  Negotiator n(2);
  RequestMeta a = ar("p"), b = ar("p");
  a.prescale = 1e-7;
  b.prescale = 2e-7;
  n.addRound({{a}, {b}}, 0);
  auto r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error);
  EXPECT_NE(r[0].errorMessage.find("mismatched prescale across ranks: rank 0 submitted 1e-07; rank 1 submitted 2e-07"),
            std::string::npos) << r[0].errorMessage;
  a = ar("q");
  b = ar("q");
  a.postscale = 0.1;
  b.postscale = std::nextafter(0.1, 1.0);  // differs only in the 17th digit
  n.addRound({{a}, {b}}, 0);
  r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error);
  EXPECT_NE(r[0].errorMessage.find("postscale"), std::string::npos) << r[0].errorMessage;
  a = ar("d");
  b = ar("d");
  a.compression.kind = b.compression.kind = CompressKind::TopK;
  a.compression.density = 0.01;
  b.compression.density = 0.01000001;  // six digits read 0.01 for both
  n.addRound({{a}, {b}}, 0);
  r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error);
  EXPECT_NE(r[0].errorMessage.find("compression"), std::string::npos) << r[0].errorMessage;
  a = ar("s");
  b = ar("s");
  a.prescale = b.prescale = 0.1;
  n.addRound({{a}, {b}}, 0);
  r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].error) << r[0].errorMessage;
}

TEST(Negotiation, AllgatherFirstDimensionMayDiffer) {
  Negotiator n(3);
  RequestMeta g = ar("g", {2, 5});
  g.op = OpType::Allgather;
  auto g1 = g, g2 = g;
  g1.shape = {7, 5};
  g2.shape = {0, 5};
  n.addRound({{g}, {g1}, {g2}}, 0);
  auto r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].error) << r[0].errorMessage;
  EXPECT_EQ(r[0].firstDims, (std::vector<int64_t>{2, 7, 0}));
  // ...but not the other dimensions.
  auto bad = g;
  bad.shape = {2, 6};
  n.addRound({{g}, {bad}, {g}}, 0);
  r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error);
}

TEST(Negotiation, AlltoallSplitMatrix) {
  Negotiator n(2);
  RequestMeta a = ar("a2a", {3, 2});
  a.op = OpType::Alltoall;
  a.splits = {1, 2};
  RequestMeta b = a;
  b.shape = {4, 2};
  b.splits = {4, 0};
  n.addRound({{a}, {b}}, 0);
  auto r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  ASSERT_FALSE(r[0].error) << r[0].errorMessage;
  EXPECT_EQ(r[0].splitMatrix, (std::vector<int64_t>{1, 2, 4, 0}));
  EXPECT_EQ(expectedLocalMeta(r[0], 1).splits, b.splits);
  EXPECT_EQ(expectedLocalMeta(r[0], 1), b);
  EXPECT_EQ(expectedLocalMeta(r[0], 0), a);
}

TEST(Negotiation, DuplicateInOneRoundFailsTheTensor) {
  Negotiator n(2);
  n.addRound({{ar("d"), ar("d")}, {ar("d")}}, 0);
  auto r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error);
  EXPECT_NE(r[0].errorMessage.find("twice by rank 0"), std::string::npos) << r[0].errorMessage;
}

TEST(Negotiation, GroupMembersAreReleasedTogether) {
  Negotiator n(2);
  auto m0 = ar("g.0"), m1 = ar("g.1");
  m0.group = m1.group = "g";
  m0.groupSize = m1.groupSize = 2;
  n.addRound({{m0, m1}, {m0}}, 0);
  EXPECT_TRUE(n.takeReady().empty());  // g.0 is ready but waits for g.1
  n.addRound({{}, {m1}}, 0);
  EXPECT_EQ(names(n.takeReady()), (std::vector<std::string>{"g.0", "g.1"}));
}

TEST(Negotiation, JoinedRanksContributeToAllreduceOnly) {
  Negotiator n(3);
  RequestMeta join;
  join.name = "__join";
  join.op = OpType::Join;
  n.addRound({{ar("a")}, {ar("a")}, {join}}, 0);
  auto r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].error);
  EXPECT_EQ(r[0].joined, (std::vector<int32_t>{2}));

  RequestMeta b = ar("b");
  b.op = OpType::Broadcast;
  n.addRound({{b}, {b}, {}}, 0);
  r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].error);
  EXPECT_NE(r[0].errorMessage.find("rank 2 joined"), std::string::npos) << r[0].errorMessage;

  // Everyone joins: one join response naming the last rank to join, state reset.
  n.addRound({{join}, {}, {}}, 0);
  EXPECT_TRUE(n.takeReady().empty());
  n.addRound({{}, {join}, {}}, 0);
  r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].meta.op, OpType::Join);
  EXPECT_EQ(r[0].lastJoined, 1);
  EXPECT_FALSE(n.isJoined(2));
}

TEST(Negotiation, JoinReleasesTensorsWaitingOnlyForTheJoiner) {
  Negotiator n(2);
  n.addRound({{ar("late")}, {}}, 0);
  EXPECT_TRUE(n.takeReady().empty());
  RequestMeta join;
  join.name = "__join";
  join.op = OpType::Join;
  n.addRound({{}, {join}}, 0);
  auto r = n.takeReady();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].name(), "late");
  EXPECT_EQ(r[0].joined, (std::vector<int32_t>{1}));
}

TEST(Negotiation, StalledListsMissingRanks) {
  Negotiator n(4);
  n.addRound({{ar("s")}, {}, {ar("s")}, {}}, 10.0);
  EXPECT_TRUE(n.stalled(12.0, 5.0).empty());
  auto st = n.stalled(16.0, 5.0);
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].name, "s");
  EXPECT_EQ(st[0].submitted, (std::vector<int>{0, 2}));
  EXPECT_EQ(st[0].missing, (std::vector<int>{1, 3}));
  EXPECT_DOUBLE_EQ(st[0].ageSeconds, 6.0);
}

}  // namespace
}  // namespace coll::engine
