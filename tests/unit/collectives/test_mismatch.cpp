// Ranks whose calls differ (another collective, type, reduction, root or count, or one
// call more or less) get collInvalidUsage saying how the calls differ, at the first
// message where they meet, instead of mixed results, garbage or a transport-level size
// mismatch. Signatures (base/call_sig.hpp) first, then whole jobs over shm and tcp.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/call_sig.hpp"
#include "harness.hpp"

using namespace testing_coll;

namespace {

bool mentions(const std::string& text, const std::string& word) { return text.find(word) != std::string::npos; }

coll::OpArgs op(coll::OpKind kind, size_t count, collDataType_t dt = collFloat32, collRedOp_t red = collSum,
                int root = 0) {
  coll::OpArgs a;
  a.kind = kind;
  a.count = count;
  a.dtype = dt;
  a.op = red;
  a.root = root;
  return a;
}

TEST(CallSignature, EqualCallsMatchAndEveryArgumentCounts) {
  using coll::OpKind;
  const auto base = op(OpKind::AllReduce, 1000);
  const uint64_t s = coll::callSignature(base, 7);
  EXPECT_NE(s, 0u);
  EXPECT_EQ(coll::callSignature(base, 7), s);
  // Buffers are not part of a call's signature.
  auto other = base;
  other.sendbuf = &other;
  EXPECT_EQ(coll::callSignature(other, 7), s);
  EXPECT_NE(coll::callSignature(op(OpKind::Broadcast, 1000), 7), s);
  EXPECT_NE(coll::callSignature(op(OpKind::AllReduce, 1001), 7), s);
  EXPECT_NE(coll::callSignature(op(OpKind::AllReduce, 1000, collInt32), 7), s);
  EXPECT_NE(coll::callSignature(op(OpKind::AllReduce, 1000, collFloat32, collMax), 7), s);
  EXPECT_NE(coll::callSignature(base, 8), s);
  // The root counts where there is one, the reduction where there is one.
  EXPECT_NE(coll::callSignature(op(OpKind::Broadcast, 5, collFloat32, collSum, 1), 0),
            coll::callSignature(op(OpKind::Broadcast, 5, collFloat32, collSum, 2), 0));
  EXPECT_EQ(coll::callSignature(op(OpKind::AllReduce, 5, collFloat32, collSum, 1), 0),
            coll::callSignature(op(OpKind::AllReduce, 5, collFloat32, collSum, 2), 0));
  EXPECT_EQ(coll::callSignature(op(OpKind::Broadcast, 5, collFloat32, collSum), 0),
            coll::callSignature(op(OpKind::Broadcast, 5, collFloat32, collMax), 0));
  // A count past the field's 22 bits still differs from the count that shares its low bits.
  EXPECT_NE(coll::callSignature(op(OpKind::AllReduce, 5 + (size_t{1} << 22)), 0),
            coll::callSignature(op(OpKind::AllReduce, 5), 0));
  // Sends and receives pair with each other, never with a collective.
  EXPECT_EQ(coll::callSignature(op(OpKind::Send, 4), 3), coll::p2pSignature());
  EXPECT_EQ(coll::callSignature(op(OpKind::Recv, 9, collInt8), 0), coll::p2pSignature());
  EXPECT_NE(coll::p2pSignature(), 0u);
  // Barriers have no count or type.
  EXPECT_EQ(coll::callSignature(op(OpKind::Barrier, 0), 2), coll::callSignature(op(OpKind::Barrier, 9, collInt8), 2));
}

// A pre-multiplied sum differs from every built-in reduction, but not from another
// pre-multiplied sum: ranks pass different scalars, and number their ops apart.
TEST(CallSignature, PreMulSumIsOneReduction) {
  using coll::OpKind;
  auto pre = op(OpKind::ReduceScatter, 40, collBfloat16);
  pre.preMul = true;
  pre.scalar[0] = 1;
  auto other = pre;
  other.scalar[0] = 9;
  const uint64_t s = coll::callSignature(pre, 3);
  EXPECT_EQ(coll::callSignature(other, 3), s);
  for (collRedOp_t red : {collSum, collProd, collMax, collMin, collAvg})
    EXPECT_NE(coll::callSignature(op(OpKind::ReduceScatter, 40, collBfloat16, red), 3), s) << red;
  EXPECT_TRUE(mentions(coll::describeCall(s), "reducescatter (bfloat16, premulsum, count 40; collective call #4)"))
      << coll::describeCall(s);
}

TEST(CallSignature, TheTextNamesBothCallsAndWhatDiffers) {
  using coll::OpKind;
  std::string t = coll::callMismatchText(1, coll::callSignature(op(OpKind::AllReduce, 16, collFloat32, collMax), 0), 0,
                                         coll::callSignature(op(OpKind::AllReduce, 16), 0));
  EXPECT_TRUE(mentions(t, "rank 1 sent a message of its allreduce (float, max, count 16; collective call #1)")) << t;
  EXPECT_TRUE(mentions(t, "where rank 0 is in its allreduce (float, sum, count 16; collective call #1)")) << t;
  EXPECT_TRUE(mentions(t, "differ in reduction (")) << t;

  t = coll::callMismatchText(2, coll::callSignature(op(OpKind::Broadcast, 8, collInt32, collSum, 3), 4), -1,
                             coll::callSignature(op(OpKind::AllReduce, 8 + (size_t{1} << 22), collInt32), 5));
  EXPECT_TRUE(mentions(t, "rank 2 sent a message of its broadcast (int32, root 3, count 8; collective call #5)")) << t;
  EXPECT_TRUE(mentions(t, "where this rank is in its allreduce (int32, sum, count >= 4194304; collective call #6)")) << t;
  EXPECT_TRUE(mentions(t, "differ in kind and number of earlier collective calls")) << t;

  t = coll::callMismatchText(0, coll::p2pSignature(), 1, coll::callSignature(op(OpKind::Barrier, 0), 0));
  EXPECT_TRUE(mentions(t, "message of its send/recv where rank 1 is in its barrier (collective call #1)")) << t;

  // A corrupt peer's word is described, not trusted.
  t = coll::callMismatchText(0, 0xFFFFFFFFFFFFFFFFull, 1, coll::p2pSignature());
  EXPECT_TRUE(mentions(t, "unknown call (signature 0xffffffffffffffff)")) << t;
}

// One job per transport, its ranks as threads.
class Mismatch : public ::testing::TestWithParam<const char*> {
 protected:
  // What one rank did: its call's result and the communicator's last error text.
  struct Outcome {
    collResult_t rc = collInternalError;
    std::string text;
  };

  // Runs body(rank, comm) on every rank of an n-rank job over the transport under test.
  std::vector<Outcome> run(int n, const std::function<collResult_t(int, collComm_t)>& body,
                           const char* timeoutSec = "30") {
    Job job(n, {{"COLL_TRANSPORT", GetParam()}, {"COLL_TIMEOUT", timeoutSec}});
    std::vector<Outcome> out(n);
    if (!job.ok()) return out;
    job.run([&](int r, collComm_t c) {
      out[r].rc = body(r, c);
      out[r].text = collGetLastError(c);
    });
    return out;
  }

  // No rank but `mayPass` may report success; some rank reports collInvalidUsage naming
  // `what`.
  static void expectCaught(const std::vector<Outcome>& out, const char* what, int mayPass = -1) {
    bool named = false;
    for (size_t r = 0; r < out.size(); ++r) {
      if (static_cast<int>(r) != mayPass) {
        EXPECT_NE(out[r].rc, collSuccess) << "rank " << r << " returned success";
      }
      if (out[r].rc == collInvalidUsage && mentions(out[r].text, what)) named = true;
    }
    EXPECT_TRUE(named) << "no rank said the calls differ in " << what << "; rank 0: " << out[0].text;
  }
};

std::vector<float> input(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(rank * 100 + i);
  return v;
}

TEST_P(Mismatch, ReductionTypeCountAndKind) {
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    const int odd = n - 1;  // the rank whose call differs
    expectCaught(run(n, [&](int r, collComm_t c) {
      auto in = input(r, 64), out = in;
      return collAllReduce(in.data(), out.data(), 64, collFloat32, r == odd ? collMax : collSum, c, nullptr);
    }), "differ in reduction");
    expectCaught(run(n, [&](int r, collComm_t c) {
      auto in = input(r, 64), out = in;
      return collAllReduce(in.data(), out.data(), 64, r == odd ? collInt32 : collFloat32, collSum, c, nullptr);
    }), "differ in data type");
    expectCaught(run(n, [&](int r, collComm_t c) {
      auto in = input(r, 64), out = in;
      return collAllReduce(in.data(), out.data(), r == odd ? 48 : 64, collFloat32, collSum, c, nullptr);
    }), "differ in count");
    // The odd rank is the broadcast's root: its sends go out, and it cannot tell that
    // nobody receives them as a broadcast. (A non-root rank waiting for the root while the
    // root waits for it in an all-reduce exchanges no message at all: both time out,
    // each message naming its own call.)
    expectCaught(run(n, [&](int r, collComm_t c) {
      auto in = input(r, 64), out = in;
      if (r == odd) return collBroadcast(in.data(), out.data(), 64, collFloat32, odd, c, nullptr);
      return collAllReduce(in.data(), out.data(), 64, collFloat32, collSum, c, nullptr);
    }), "differ in kind", odd);
    expectCaught(run(n, [&](int r, collComm_t c) {
      auto in = input(r, 64), out = in;
      if (r == odd) return collBarrier(c);
      return collAllReduce(in.data(), out.data(), 64, collFloat32, collSum, c, nullptr);
    }), "differ in kind");
  }
}

// A pre-multiplied sum on one rank against a plain sum on the others, in each reducing
// collective; pre-multiplied sums on every rank with different scalars agree (test_premul).
TEST_P(Mismatch, PreMulSumAgainstSum) {
  for (int n : {2, 3}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    const int odd = n - 1;
    for (int kind = 0; kind < 3; ++kind) {
      auto out = run(n, [&](int r, collComm_t c) {
        float s = 2;
        collRedOp_t pre;
        collResult_t rc = collRedOpCreatePreMulSum(&pre, &s, collFloat32, collScalarHostImmediate, c);
        if (rc != collSuccess) return rc;
        const collRedOp_t op = r == odd ? pre : collSum;
        auto in = input(r, 64 * n), buf = in;
        if (kind == 0) return collAllReduce(in.data(), buf.data(), 64, collFloat32, op, c, nullptr);
        if (kind == 1) return collReduce(in.data(), buf.data(), 64, collFloat32, op, 0, c, nullptr);
        return collReduceScatter(in.data(), buf.data(), 64, collFloat32, op, c, nullptr);
      });
      // Rank 0 is the reduce's root and cannot succeed; ranks that only send may return
      // before the rank they send to fails.
      if (kind == 1) {
        EXPECT_NE(out[0].rc, collSuccess) << out[0].text;
        bool caught = false;
        for (const Outcome& o : out) caught = caught || (o.rc == collInvalidUsage && mentions(o.text, "differ in reduction"));
        EXPECT_TRUE(caught) << out[0].text;
      } else {
        expectCaught(out, "differ in reduction");
      }
      bool named = false;
      for (const Outcome& o : out) named = named || mentions(o.text, "premulsum");
      EXPECT_TRUE(named) << "kind " << kind << ": " << out[0].text;
    }
  }
}

// A rank that made one call more (here of count 0, which moves nothing) is out of step
// with the others from then on; their next call says so.
TEST_P(Mismatch, OneCallMoreOnOneRank) {
  expectCaught(run(3, [&](int r, collComm_t c) {
    auto in = input(r, 16), out = in;
    if (r == 1) {
      collResult_t rc = collAllReduce(in.data(), out.data(), 0, collFloat32, collSum, c, nullptr);
      if (rc != collSuccess) return rc;
    }
    return collAllReduce(in.data(), out.data(), 16, collFloat32, collSum, c, nullptr);
  }), "differ in number of earlier collective calls");
}

// Each of two ranks taking itself for the broadcast's root: both only send, so the
// broadcast itself cannot tell; the next call meets the unclaimed message and says whose.
TEST_P(Mismatch, RootsThatDifferShowAtTheNextCall) {
  auto out = run(2, [&](int r, collComm_t c) {
    auto in = input(r, 16), buf = in;
    collResult_t rc = collBroadcast(in.data(), buf.data(), 16, collFloat32, r, c, nullptr);
    if (rc != collSuccess) return rc;
    return collAllReduce(in.data(), buf.data(), 16, collFloat32, collSum, c, nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].rc, collInvalidUsage) << out[r].text;
    EXPECT_TRUE(mentions(out[r].text, "its broadcast (float, root " + std::to_string(1 - r) + ", count 16")) << out[r].text;
  }
}

// Gather against scatter, and gather or scatter with another root or count: the rank that
// receives the odd message names both calls. Ranks that only send cannot tell, and may
// return before the receiver fails (as a broadcast's root does above).
TEST_P(Mismatch, GatherAndScatter) {
  std::vector<Outcome> out;
  for (int n : {2, 3}) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    const int odd = n - 1;
    // Rank 0 is the gather's root; the odd rank is the scatter's root and sends it a block.
    out = run(n, [&](int r, collComm_t c) {
      auto in = input(r, 16 * n);
      std::vector<float> all(16 * n), mine(16);
      if (r == odd) return collScatter(in.data(), mine.data(), 16, collFloat32, odd, c, nullptr);
      return collGather(in.data(), r == 0 ? all.data() : nullptr, 16, collFloat32, 0, c, nullptr);
    });
    EXPECT_EQ(out[0].rc, collInvalidUsage) << out[0].text;
    EXPECT_TRUE(mentions(out[0].text, "rank " + std::to_string(odd) + " sent a message of its scatter (float, root " +
                                          std::to_string(odd) + ", count 16;"))
        << out[0].text;
    EXPECT_TRUE(mentions(out[0].text, "is in its gather (float, root 0, count 16;")) << out[0].text;
    EXPECT_TRUE(mentions(out[0].text, "differ in kind")) << out[0].text;
    // A gather whose root hears another count from one rank.
    out = run(n, [&](int r, collComm_t c) {
      auto in = input(r, 16);
      std::vector<float> all(16 * n);
      return collGather(in.data(), all.data(), r == odd ? 12 : 16, collFloat32, 0, c, nullptr);
    });
    EXPECT_EQ(out[0].rc, collInvalidUsage) << out[0].text;
    EXPECT_TRUE(mentions(out[0].text, "its gather (float, root 0, count 12;")) << out[0].text;
    EXPECT_TRUE(mentions(out[0].text, "differ in count")) << out[0].text;
  }
  // Three ranks: ranks 0 and 1 scatter from rank 0, rank 2 expects rank 1's blocks and
  // finds rank 0's message instead, where it posted no receive. The net links do not
  // look at such messages (rank 2 would wait out its timeout there).
  if (GetParam() == std::string("net")) return;
  out = run(3, [&](int r, collComm_t c) {
    auto in = input(r, 48);
    std::vector<float> mine(16);
    const int root = r == 2 ? 1 : 0;
    return collScatter(r == root ? in.data() : nullptr, mine.data(), 16, collFloat32, root, c, nullptr);
  });
  EXPECT_EQ(out[2].rc, collInvalidUsage) << out[2].text;
  EXPECT_TRUE(mentions(out[2].text, "rank 0 sent a message of its scatter (float, root 0, count 16;")) << out[2].text;
  EXPECT_TRUE(mentions(out[2].text, "differ in root")) << out[2].text;
}

// Two ranks each taking the other for a gather's root (or itself for a scatter's): both
// only send, so the call completes; the next call meets the unclaimed message.
TEST_P(Mismatch, GatherScatterRootsThatDifferShowAtTheNextCall) {
  for (bool gather : {true, false}) {
    auto out = run(2, [&](int r, collComm_t c) {
      auto in = input(r, 32), buf = in;
      collResult_t rc = gather ? collGather(in.data(), nullptr, 16, collFloat32, 1 - r, c, nullptr)
                               : collScatter(in.data(), buf.data(), 16, collFloat32, r, c, nullptr);
      if (rc != collSuccess) return rc;
      return collAllReduce(in.data(), buf.data(), 16, collFloat32, collSum, c, nullptr);
    });
    // Over net links a rank that found the mismatch first may have closed its connection
    // before the other's all-reduce posted its send: that one then reports the closed
    // connection. At least one rank names the mismatch; the other names it or the close.
    const bool net = GetParam() == std::string("net");
    int named = 0;
    for (int r = 0; r < 2; ++r) {
      const std::string call = std::string(gather ? "gather" : "scatter") + " (float, root " +
                               std::to_string(gather ? r : 1 - r) + ", count 16";
      if (net && out[r].rc != collInvalidUsage && mentions(out[r].text, "closed the connection")) continue;
      EXPECT_EQ(out[r].rc, collInvalidUsage) << out[r].text;
      EXPECT_TRUE(mentions(out[r].text, "its " + call)) << out[r].text;
      ++named;
    }
    EXPECT_GE(named, 1);
  }
}

// Each rank waiting for the other as a broadcast's root: no message moves, so nothing can
// be compared; each rank's timeout names the call it is in.
TEST_P(Mismatch, WaitsWithNoMessageBetweenThemNameTheirCalls) {
  auto out = run(2, [&](int r, collComm_t c) {
    auto in = input(r, 16), buf = in;
    return collBroadcast(in.data(), buf.data(), 16, collFloat32, 1 - r, c, nullptr);
  }, "2");
  int timeouts = 0;
  for (int r = 0; r < 2; ++r) {
    const std::string call = "this rank's broadcast (float, root " + std::to_string(1 - r) + ", count 16; collective call #1)";
    // Over net, the rank that times out first closes its connections, and a backend that
    // tells the other end (the test plugin does, like UCX) fails the other rank's wait
    // before its own timeout: that rank names its call in the link's error instead.
    if (out[r].rc == collRemoteError && GetParam() == std::string("net")) {
      EXPECT_TRUE(mentions(out[r].text, "with rank " + std::to_string(1 - r) + " in " + call)) << out[r].text;
      continue;
    }
    ++timeouts;
    EXPECT_EQ(out[r].rc, collTimeout) << out[r].text;
    EXPECT_TRUE(mentions(out[r].text, "or in another call than " + call)) << out[r].text;
  }
  EXPECT_GE(timeouts, 1);
}

// A send where the peer is in a collective: named as a send/recv.
TEST_P(Mismatch, SendAgainstACollective) {
  auto out = run(2, [&](int r, collComm_t c) {
    auto in = input(r, 16), buf = in;
    if (r == 0) return collSend(in.data(), 16, collFloat32, 1, c, nullptr);
    return collAllReduce(in.data(), buf.data(), 16, collFloat32, collSum, c, nullptr);
  });
  EXPECT_EQ(out[1].rc, collInvalidUsage) << out[1].text;
  EXPECT_TRUE(mentions(out[1].text, "rank 0 sent a message of its send/recv")) << out[1].text;
}

// Matching calls in a group, with point-to-point among them, then a call of count 0
// and a barrier: nothing is flagged and the results are right (the whole suite runs with
// the check on; this is the short form).
TEST_P(Mismatch, MatchingCallsPass) {
  auto out = run(3, [&](int r, collComm_t c) {
    auto in = input(r, 30);
    std::vector<float> sum(30), bc(30), got(30);
    collResult_t rc = collGroupStart();
    if (rc == collSuccess) rc = collAllReduce(in.data(), sum.data(), 30, collFloat32, collSum, c, nullptr);
    if (rc == collSuccess) rc = collBroadcast(in.data(), bc.data(), 30, collFloat32, 2, c, nullptr);
    if (rc == collSuccess) rc = collSend(in.data(), 30, collFloat32, (r + 1) % 3, c, nullptr);
    if (rc == collSuccess) rc = collRecv(got.data(), 30, collFloat32, (r + 2) % 3, c, nullptr);
    collResult_t end = collGroupEnd();
    if (rc == collSuccess) rc = end;
    if (rc == collSuccess) rc = collAllReduce(in.data(), sum.data(), 0, collFloat32, collSum, c, nullptr);
    if (rc == collSuccess) rc = collBarrier(c);
    if (rc != collSuccess) return rc;
    for (size_t i = 0; i < 30; ++i) {
      EXPECT_EQ(sum[i], input(0, 30)[i] + input(1, 30)[i] + input(2, 30)[i]) << "rank " << r << " element " << i;
      EXPECT_EQ(bc[i], input(2, 30)[i]) << "rank " << r << " element " << i;
      EXPECT_EQ(got[i], input((r + 2) % 3, 30)[i]) << "rank " << r << " element " << i;
    }
    return rc;
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r].rc, collSuccess) << "rank " << r << ": " << out[r].text;
}

// net: over the in-memory backend that meson.build names in COLL_NET_PLUGIN.
INSTANTIATE_TEST_SUITE_P(Transports, Mismatch, ::testing::Values("shm", "tcp", "net"));

}  // namespace
