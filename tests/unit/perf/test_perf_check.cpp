#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "check.hpp"
#include "common.hpp"

using perf::Coll;
using perf::Pattern;

namespace {

const collDataType_t kAllTypes[] = {collInt8,  collUint8, collInt16, collUint16,
                                    collInt32, collUint32, collInt64, collUint64,
                                    collHalf,  collFloat,  collDouble, collBfloat16};

// The library's documented arithmetic: combine two values in the type (integers wrap,
// half/bfloat16 round after every step), ranks in the given order; avg divides once.
double simulateReduction(const Pattern& p, collRedOp_t op, int n, size_t elem, bool reverse) {
  op = perf::plainOp(op);
  collDataType_t dt = p.type();
  int first = reverse ? n - 1 : 0;
  double acc = perf::roundToType(static_cast<double>(p.value(first, elem)), dt);
  for (int i = 1; i < n; ++i) {
    int r = reverse ? n - 1 - i : i;
    double v = perf::roundToType(static_cast<double>(p.value(r, elem)), dt);
    const auto ia = static_cast<int64_t>(acc), iv = static_cast<int64_t>(v);
    double c = op == collProd ? acc * v
             : op == collMax  ? std::max(acc, v)
             : op == collMin  ? std::min(acc, v)
             : op == collBand ? static_cast<double>(ia & iv)
             : op == collBor  ? static_cast<double>(ia | iv)
             : op == collBxor ? static_cast<double>(ia ^ iv)
                              : acc + v;
    acc = perf::roundToType(c, dt);
  }
  if (op != collAvg) return acc;
  bool floating = dt == collHalf || dt == collBfloat16 || dt == collFloat || dt == collDouble;
  if (floating) return perf::roundToType(acc / n, dt);
  return static_cast<double>(static_cast<int64_t>(acc) / n);
}

}  // namespace

TEST(PerfHalf, KnownEncodings) {
  EXPECT_EQ(perf::floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(perf::floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(perf::floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(perf::floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(perf::floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(perf::floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(perf::floatToHalf(65520.0f), 0x7c00);  // rounds up to inf
  EXPECT_EQ(perf::floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(perf::floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(perf::floatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie to even (0)
  EXPECT_EQ(perf::floatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // tie to even (2)
  EXPECT_EQ(perf::floatToHalf(2049.0f), 0x6800);  // tie: 2048 (even)
  EXPECT_EQ(perf::floatToHalf(2051.0f), 0x6802);  // tie: 2052 (even)
  EXPECT_EQ(perf::floatToHalf(2050.0f), 0x6801);
  EXPECT_TRUE(std::isnan(perf::halfToFloat(perf::floatToHalf(NAN))));
  EXPECT_EQ(perf::halfToFloat(0x3555), 0.333251953125f);
}

TEST(PerfHalf, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = perf::halfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(perf::floatToHalf(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(PerfBf16, KnownEncodingsAndRoundTrip) {
  EXPECT_EQ(perf::floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(perf::floatToBf16(256.0f), 0x4380);
  EXPECT_EQ(perf::bf16ToFloat(perf::floatToBf16(257.0f)), 256.0f);  // tie to even
  EXPECT_EQ(perf::bf16ToFloat(perf::floatToBf16(259.0f)), 260.0f);  // tie to even
  EXPECT_EQ(perf::bf16ToFloat(perf::floatToBf16(258.0f)), 258.0f);
  EXPECT_TRUE(std::isnan(perf::bf16ToFloat(perf::floatToBf16(NAN))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    float f = perf::bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(perf::floatToBf16(f), b) << "bf16 0x" << std::hex << b;
  }
}

TEST(PerfStore, IntegersWrapLikeTheHardware) {
  EXPECT_EQ(perf::roundToType(135, collInt8), -121);
  EXPECT_EQ(perf::roundToType(300, collUint8), 44);
  EXPECT_EQ(perf::roundToType(-1, collUint32), 4294967295.0);
  EXPECT_EQ(perf::roundToType(2049, collHalf), 2048);
  EXPECT_EQ(perf::roundToType(0.5, collFloat), 0.5);
}

TEST(PerfPattern, HandComputedValues) {
  // (elem*7 + rank*37) % 100 without a reduction.
  Pattern copy(collFloat, perf::kNoOp, 4);
  EXPECT_EQ(copy.value(0, 0), 0);
  EXPECT_EQ(copy.value(1, 1), 44);
  EXPECT_EQ(copy.value(3, 2), 25);
  EXPECT_EQ(copy.value(0, 157), 99);
  // elem 57: 99 on rank 0 and 36 on rank 1; 135 wraps to -121 in int8.
  EXPECT_EQ(Pattern(collInt8, collSum, 2).reduced(57), -121);
  EXPECT_EQ(Pattern(collUint8, collSum, 2).reduced(57), 135);
  EXPECT_EQ(Pattern(collInt8, collAvg, 2).reduced(57), -60);  // truncates toward zero
  EXPECT_EQ(Pattern(collUint8, collAvg, 2).reduced(57), 67);
  EXPECT_EQ(Pattern(collFloat, collAvg, 2).reduced(57), 67.5);
  EXPECT_EQ(Pattern(collInt32, collMax, 2).reduced(57), 99);
  EXPECT_EQ(Pattern(collInt32, collMin, 2).reduced(57), 36);
  // prod: 2 where (rank + elem) % 3 == 0, else 1.
  EXPECT_EQ(Pattern(collHalf, collProd, 3).reduced(0), 2);
  EXPECT_EQ(Pattern(collHalf, collProd, 6).reduced(0), 4);
  // bfloat16 sums shrink the range so that n * max <= 256.
  EXPECT_EQ(Pattern(collBfloat16, collSum, 8).range(), 33);
  EXPECT_EQ(Pattern(collHalf, collSum, 8).range(), 100);
  EXPECT_EQ(Pattern(collBfloat16, collMax, 8).range(), 100);
}

// The point of the pattern: any reduction order gives the exact expected value in every
// type, so the check can demand bit-exact results.
TEST(PerfPattern, ExpectedIsExactInAnyOrderForEveryTypeOpAndSize) {
  for (collDataType_t dt : kAllTypes) {
    for (int op = 0; op < collNumOps; ++op) {
      if (perf::isBitwiseOp(collRedOp_t(op)) && perf::isFloatingType(dt)) continue;
      for (int n : {1, 2, 3, 4, 7, 8, 16}) {
        Pattern p(dt, collRedOp_t(op), n);
        for (size_t e = 0; e < 300; ++e) {
          double expected = p.reduced(e);
          for (bool reverse : {false, true}) {
            double got = simulateReduction(p, collRedOp_t(op), n, e, reverse);
            ASSERT_TRUE(p.matches(got, expected))
                << perf::typeName(dt) << " " << perf::opName(collRedOp_t(op)) << " n=" << n
                << " elem=" << e << " got " << got << " expected " << expected;
            if (perf::plainOp(collRedOp_t(op)) != collAvg) {
              ASSERT_EQ(got, expected);
            }
          }
        }
      }
    }
  }
}

TEST(PerfPattern, AvgToleranceRejectsRealErrors) {
  Pattern p(collHalf, collAvg, 3);
  double expected = p.reduced(1);
  EXPECT_TRUE(p.matches(expected, expected));
  EXPECT_FALSE(p.matches(expected + 1.0, expected));
  EXPECT_FALSE(p.matches(NAN, expected));
  Pattern exact(collInt32, collSum, 3);
  EXPECT_FALSE(exact.matches(exact.reduced(1) + 1, exact.reduced(1)));
}

TEST(PerfExpected, DataMovementCollectives) {
  perf::Counts ag = perf::countsFor(Coll::AllGather, 48, 4, 3, 0);  // 4 per rank
  Pattern p(collFloat, perf::kNoOp, 3);
  EXPECT_EQ(perf::expectedOutput(Coll::AllGather, p, ag, 3, 0, 0, 5), 44);  // rank 1 elem 1
  perf::Counts a2a = perf::countsFor(Coll::AllToAll, 48, 4, 3, 2);
  // rank 2, element 5: from rank 1, its element 2*4 + 1 = 9: (63 + 37) % 100.
  EXPECT_EQ(perf::expectedOutput(Coll::AllToAll, p, a2a, 3, 2, 0, 5), 0);
  perf::Counts whole = perf::countsFor(Coll::Broadcast, 48, 4, 3, 0);
  EXPECT_EQ(perf::expectedOutput(Coll::Broadcast, p, whole, 3, 0, 2, 1), p.value(2, 1));
  EXPECT_EQ(perf::expectedOutput(Coll::SendRecv, p, whole, 3, 0, 0, 1), p.value(2, 1));
  EXPECT_EQ(perf::expectedOutput(Coll::SendRecv, p, whole, 3, 2, 0, 1), p.value(1, 1));
  Pattern sum(collInt32, collSum, 3);
  perf::Counts rs = perf::countsFor(Coll::ReduceScatter, 48, 4, 3, 1);  // 4 per rank
  EXPECT_EQ(perf::expectedOutput(Coll::ReduceScatter, sum, rs, 3, 1, 0, 2), sum.reduced(6));
}

TEST(PerfCountWrong, CountsEveryBadElementAndSkipsNonRootReduce) {
  const int n = 3;
  for (collDataType_t dt : kAllTypes) {
    Pattern p(dt, collSum, n);
    size_t ts = perf::typeBytes(dt);
    perf::Counts k = perf::countsFor(Coll::AllReduce, 64 * ts, ts, n, 0);
    std::vector<unsigned char> out(k.recvCount * perf::typeBytes(dt));
    for (size_t i = 0; i < k.recvCount; ++i) perf::storeValue(out.data(), i, dt, p.reduced(i));
    EXPECT_EQ(perf::countWrong(Coll::AllReduce, p, k, n, 0, 0, out.data()), 0u)
        << perf::typeName(dt);
    perf::storeValue(out.data(), 3, dt, p.reduced(3) + 1);
    std::memset(out.data() + 10 * perf::typeBytes(dt), 0xFF, perf::typeBytes(dt));
    EXPECT_EQ(perf::countWrong(Coll::AllReduce, p, k, n, 0, 0, out.data()), 2u)
        << perf::typeName(dt);
    EXPECT_EQ(perf::countWrong(Coll::Reduce, p, k, n, 1, 0, out.data()), 0u);
    EXPECT_EQ(perf::countWrong(Coll::Reduce, p, k, n, 0, 0, out.data()), 2u);
  }
}

TEST(PerfFill, WritesThePatternInTheType) {
  Pattern p(collBfloat16, collSum, 4);
  std::vector<uint16_t> buf(20);
  perf::fillInput(buf.data(), buf.size(), p, 3);
  for (size_t i = 0; i < buf.size(); ++i)
    EXPECT_EQ(perf::bf16ToFloat(buf[i]), static_cast<float>(p.value(3, i)));
}

// Values by hand: with no reduction the range is 100, so input element e of rank r is
// (7e + 37r) mod 100.
TEST(PerfExpected, GroupedPointToPointTools) {
  Pattern p(collFloat, perf::kNoOp, 3);
  // gather, 48 bytes of float on 3 ranks: 4 per rank. Root 1, element 9 = rank 2's
  // element 1: (7 + 74) mod 100.
  perf::Counts g = perf::countsFor(Coll::Gather, 48, 4, 3, 1);
  EXPECT_EQ(perf::expectedOutput(Coll::Gather, p, g, 3, 1, 1, 9), 81);
  EXPECT_EQ(perf::expectedOutput(Coll::Gather, p, g, 3, 1, 1, 5), 44);  // rank 1 elem 1
  // scatter: rank 2 receives block 2 of the root's send buffer. Root 1, element 3 =
  // root's element 2*4 + 3 = 11: (77 + 37) mod 100.
  perf::Counts s = perf::countsFor(Coll::Scatter, 48, 4, 3, 2);
  EXPECT_EQ(perf::expectedOutput(Coll::Scatter, p, s, 3, 2, 1, 3), 14);
  // Root 2, rank 0, element 0: root's element 0 = 74.
  perf::Counts s0 = perf::countsFor(Coll::Scatter, 48, 4, 3, 0);
  EXPECT_EQ(perf::expectedOutput(Coll::Scatter, p, s0, 3, 0, 2, 0), 74);
  // hypercube, 64 bytes of float on 4 ranks: 4 per rank; element 14 = rank 3's element
  // 2: (14 + 111) mod 100, on every rank.
  Pattern p4(collFloat, perf::kNoOp, 4);
  for (int rank = 0; rank < 4; ++rank) {
    perf::Counts h = perf::countsFor(Coll::HyperCube, 64, 4, 4, rank);
    EXPECT_EQ(perf::expectedOutput(Coll::HyperCube, p4, h, 4, rank, 0, 14), 25);
    EXPECT_EQ(perf::expectedOutput(Coll::HyperCube, p4, h, 4, rank, 0, 0), 0);
  }
}

// gather's output is defined on the root only (like reduce); scatter's on every rank.
TEST(PerfCountWrong, GatherChecksTheRootOnlyScatterEveryRank) {
  EXPECT_TRUE(perf::outputDefined(Coll::Gather, 2, 2));
  EXPECT_FALSE(perf::outputDefined(Coll::Gather, 0, 2));
  EXPECT_TRUE(perf::outputDefined(Coll::Scatter, 0, 2));
  EXPECT_TRUE(perf::outputDefined(Coll::HyperCube, 3, 0));
  const int n = 3, root = 1;
  for (collDataType_t dt : kAllTypes) {
    Pattern p(dt, perf::kNoOp, n);
    const size_t ts = perf::typeBytes(dt);
    perf::Counts g = perf::countsFor(Coll::Gather, 30 * ts, ts, n, root);  // 10 per rank
    std::vector<unsigned char> out(g.recvCount * ts);
    for (size_t i = 0; i < g.recvCount; ++i)
      perf::storeValue(out.data(), i, dt, static_cast<double>(p.value(static_cast<int>(i / 10), i % 10)));
    EXPECT_EQ(perf::countWrong(Coll::Gather, p, g, n, root, root, out.data()), 0u) << perf::typeName(dt);
    perf::storeValue(out.data(), 12, dt, static_cast<double>(p.value(1, 2) + 1));
    std::memset(out.data() + 29 * ts, 0xFF, ts);
    EXPECT_EQ(perf::countWrong(Coll::Gather, p, g, n, root, root, out.data()), 2u) << perf::typeName(dt);
    EXPECT_EQ(perf::countWrong(Coll::Gather, p, g, n, 0, root, out.data()), 0u) << perf::typeName(dt);

    // scatter on rank 2: the root's elements 20..29.
    perf::Counts s = perf::countsFor(Coll::Scatter, 30 * ts, ts, n, 2);
    std::vector<unsigned char> got(s.recvCount * ts);
    for (size_t i = 0; i < s.recvCount; ++i)
      perf::storeValue(got.data(), i, dt, static_cast<double>(p.value(root, 20 + i)));
    EXPECT_EQ(perf::countWrong(Coll::Scatter, p, s, n, 2, root, got.data()), 0u) << perf::typeName(dt);
    std::memset(got.data(), 0xFF, ts);
    EXPECT_EQ(perf::countWrong(Coll::Scatter, p, s, n, 2, root, got.data()), 1u) << perf::typeName(dt);
  }
}
