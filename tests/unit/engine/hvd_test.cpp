// The public hvd API over real communicators: ranks as threads, each with its own
// communicator from one shared unique id (collGetUniqueId + collCommInitRank).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "collective/hvd.hpp"
#include "hvd_harness.hpp"
#include "json_check.hpp"

namespace {

namespace hvd = collective::hvd;
using namespace hvdtest;

// Fused, reordered execution gives exactly what one unfused collAllReduce per tensor gives.
// With 3+ ranks a ring sums an element in an order that depends on its position in the
// buffer, so float results of fused and unfused runs may differ in the last bit; there
// the inputs are integer-valued (exact sums) to keep the check bitwise.
TEST(Hvd, ReorderedAsyncAllreduceEqualsUnfusedReference) {
  for (int n : {2, 3}) {
    withComms(n, [&](int r, collComm_t comm) {
      const int tensors = 60;
      std::mt19937 rng(100 + r);
      std::uniform_real_distribution<float> u(-1, 1);
      std::vector<std::vector<float>> in(tensors), out(tensors), ref(tensors);
      for (int t = 0; t < tensors; ++t) {
        in[t].resize(1 + (t * 131) % 2000 + (t % 15 == 0 ? 300000 : 0));
        for (auto& x : in[t]) x = n == 2 ? u(rng) : std::round(u(rng) * 1000);
        out[t].assign(in[t].size(), 0);
      }
      {
        auto ctx = hvd::Context::from_comm(comm);
        EXPECT_EQ(ctx->size(), n);
        EXPECT_EQ(ctx->rank(), r);
        std::vector<int> order(tensors);
        for (int t = 0; t < tensors; ++t) order[t] = t;
        for (int step = 0; step < 2; ++step) {
          std::shuffle(order.begin(), order.end(), rng);
          std::vector<hvd::Handle> hs;
          for (int t : order) {
            char name[16];  // not "g" + to_string: GCC 12 warns falsely (-Wrestrict) on that here
            snprintf(name, sizeof name, "g%d", t);
            hs.push_back(ctx->allreduce_async(view(in[t]), view(out[t]), name, {.op = hvd::ReduceOp::Sum}));
          }
          for (auto& h : hs) hvd::synchronize(h);
        }
        auto st = ctx->stats();
        EXPECT_EQ(st.negotiated, static_cast<uint64_t>(tensors));
        EXPECT_EQ(st.cache_hits, static_cast<uint64_t>(tensors));
        EXPECT_LT(st.collectives, static_cast<uint64_t>(tensors));
      }
      // Unfused reference on the same communicator, once the engine let go of it.
      for (int t = 0; t < tensors; ++t) {
        ref[t].resize(in[t].size());
        ASSERT_EQ(collAllReduce(in[t].data(), ref[t].data(), in[t].size(), collFloat32, collSum, comm, nullptr),
                  collSuccess);
        ASSERT_EQ(out[t], ref[t]) << "ranks " << n << " tensor " << t;
      }
    });
  }
}

TEST(Hvd, AverageScalingAndGroupedAllreduce) {
  withComms(2, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<float> a(100, static_cast<float>(r + 1)), b(7, 3.0f * (r + 1)), oa(100), ob(7);
    ctx->allreduce_async(view(a), view(oa), "avg",
                         {.op = hvd::ReduceOp::Average, .prescale_factor = 2.0, .postscale_factor = 0.5})
        .wait();
    EXPECT_EQ(oa[0], 1.5f);  // ((2*1 + 2*2) / 2) * 0.5
    ctx->grouped_allreduce_async({view(a), view(b)}, {view(oa), view(ob)}, "grp", {.op = hvd::ReduceOp::Max})
        .wait();
    EXPECT_EQ(oa[99], 2.0f);
    EXPECT_EQ(ob[6], 6.0f);
  });
}

TEST(Hvd, MismatchAndDuplicateErrors) {
  std::atomic<bool> dupChecked{false};
  withComms(2, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<float> a(8, 1), o(8);
    hvd::Tensor t{a.data(), collFloat32, {r == 0 ? 8 : 4}};
    try {
      ctx->allreduce_async(t, t, "bad").wait();
      ADD_FAILURE() << "mismatch not reported";
    } catch (const hvd::Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("'bad'"), std::string::npos) << m;
      EXPECT_NE(m.find("rank 0 submitted [8]"), std::string::npos) << m;
      EXPECT_NE(m.find("rank 1 submitted [4]"), std::string::npos) << m;
    }
    if (r == 0) {
      auto h = ctx->allreduce_async(view(a), view(o), "dup");
      EXPECT_THROW(ctx->allreduce_async(view(a), view(o), "dup"), hvd::Error);
      dupChecked = true;
      h.wait();
    } else {
      while (!dupChecked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ctx->allreduce_async(view(a), view(o), "dup").wait();
    }
    EXPECT_EQ(o[0], 1.0f);  // Average of 1 and 1
  });
}

// A shape whose element count overflows int64 used to wrap: [2^32, 2^32] looked empty
// (success, nothing written) and [2^61, 3] failed in the engine thread, which stopped the
// engine for every later call.
TEST(Hvd, ShapeTooLargeIsInvalidArgument) {
  withComms(1, [&](int, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<float> a(4, 1), o(4);
    int k = 0;
    for (auto shape : {std::vector<int64_t>{int64_t(1) << 32, int64_t(1) << 32},
                       std::vector<int64_t>{int64_t(1) << 61, 3}}) {
      hvd::Tensor in{a.data(), collFloat32, shape}, out{o.data(), collFloat32, shape};
      try {
        ctx->allreduce_async(in, out, "huge" + std::to_string(k++)).wait();
        ADD_FAILURE() << "shape " << shape[0] << " x " << shape[1] << " accepted";
      } catch (const hvd::Error& e) {
        EXPECT_EQ(e.code(), collInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("more elements than fit in memory"), std::string::npos) << e.what();
      }
    }
    // The engine still serves later calls.
    ctx->allreduce_async(view(a), view(o), "fine").wait();
    EXPECT_EQ(o[0], 1.0f);
  });
}

// Top-k indexes elements with 32 bits: a larger tensor is refused at the call, and the
// engine keeps serving. Nothing reads the (small) buffers behind the claimed shape.
TEST(Hvd, TopkTensorBeyond32BitIndicesIsInvalidArgument) {
  withComms(1, [&](int, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<float> a(4, 1), o(4);
    hvd::Tensor in{a.data(), collFloat32, {(int64_t(1) << 32) + 1}};
    for (double density : {0.01, 1.0}) {
      try {
        ctx->allreduce_async(in, in, "topk-huge", {.compression = hvd::Compression::topk(density)}).wait();
        ADD_FAILURE() << "top-k over 2^32 + 1 elements accepted (density " << density << ")";
      } catch (const hvd::Error& e) {
        EXPECT_EQ(e.code(), collInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("32 bits"), std::string::npos) << e.what();
      }
    }
    ctx->allreduce_async(view(a), view(o), "fine", {.compression = hvd::Compression::topk(0.5)}).wait();
    EXPECT_EQ(o[0] + o[1] + o[2] + o[3], 2.0f);
  });
}

// Output and input may be the same buffer (in place) or apart. A partial overlap reached
// the collective on the engine's thread, whose refusal stopped the engine on that rank:
// every later call there failed, and ranks without the overlap waited in the collective.
TEST(Hvd, PartlyOverlappingOutputIsInvalidArgument) {
  withComms(2, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<float> a(101, 1), o(100);
    hvd::Tensor in{a.data(), collFloat32, {100}}, shifted{a.data() + 1, collFloat32, {100}};
    try {
      ctx->allreduce_async(in, shifted, "ov", {.op = hvd::ReduceOp::Sum}).wait();
      ADD_FAILURE() << "rank " << r << ": partly overlapping allreduce accepted";
    } catch (const hvd::Error& e) {
      EXPECT_EQ(e.code(), collInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("output overlaps input"), std::string::npos) << e.what();
    }
    EXPECT_THROW(ctx->broadcast_async(in, shifted, 0, "bov"), hvd::Error);
    // The engine still serves later calls, in place included.
    ctx->allreduce_async(in, in, "fine", {.op = hvd::ReduceOp::Sum}).wait();
    EXPECT_EQ(a[99], 2.0f);
  });
}

// Splits are summed with a bound: {INT64_MAX, INT64_MAX, 4} used to wrap to 2 and pass
// for a first dimension of 2.
TEST(Hvd, BadAlltoallSplitsAreInvalidArgument) {
  const int n = 3;
  withComms(n, [&](int, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<int32_t> rows(2, 7);
    const int64_t big = std::numeric_limits<int64_t>::max();
    const std::vector<std::pair<std::vector<int64_t>, const char*>> cases = {
        {{1, 1}, "2 splits for 3 ranks"},
        {{1, -1, 2}, "negative split -1"},
        {{1, 0, 0}, "splits sum to 1 but the first dimension is 2"},
        {{big, big, 4}, "splits add up to more than the first dimension 2"},
    };
    for (const auto& [splits, message] : cases) {
      try {
        ctx->alltoall_async({rows.data(), collInt32, {2}}, splits, "bad").wait();
        ADD_FAILURE() << message << ": accepted";
      } catch (const hvd::Error& e) {
        EXPECT_EQ(e.code(), collInvalidArgument);
        EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      }
    }
  });
}

// Timeouts that std::chrono cannot hold in nanoseconds, and negative ones, are refused
// when the context is made rather than turning every wait into an immediate return.
TEST(Hvd, TimeoutsOutOfRangeAreRefused) {
  for (const char* var : {"COLL_SYNCHRONIZE_TIMEOUT", "COLL_SHUTDOWN_TIMEOUT"}) {
    for (const char* value : {"1e12", "-1"}) {
      withComms(1, [&](int, collComm_t comm) {
        try {
          hvd::Context::from_comm(comm);
          ADD_FAILURE() << var << "=" << value << " accepted";
        } catch (const hvd::Error& err) {
          EXPECT_EQ(err.code(), collInvalidArgument);
          EXPECT_NE(std::string(err.what()).find(var), std::string::npos) << err.what();
          EXPECT_NE(std::string(err.what()).find("between 0 and 1000000000"), std::string::npos) << err.what();
        }
      }, {{var, value}});
    }
  }
}

TEST(Hvd, AllgatherBroadcastAlltoallReducescatter) {
  const int n = 3;
  withComms(n, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<int32_t> g(2 * (r + 1), r);
    auto out = ctx->allgather_async({g.data(), collInt32, {r + 1, 2}}, "ag");
    out.wait();
    ASSERT_EQ(out.output().tensor.shape, (std::vector<int64_t>{6, 2}));
    const auto* go = static_cast<const int32_t*>(out.output().tensor.data);
    EXPECT_EQ(go[0], 0);
    EXPECT_EQ(go[2], 1);
    EXPECT_EQ(go[11], 2);

    std::vector<double> b(5, r == 2 ? 3.25 : 0.0);
    ctx->broadcast_async({b.data(), collFloat64, {5}}, {b.data(), collFloat64, {5}}, 2, "bc").wait();
    EXPECT_EQ(b[4], 3.25);

    std::vector<int32_t> s = {r, r, r};  // one row to each rank
    auto a2a = ctx->alltoall_async({s.data(), collInt32, {3}}, {}, "a2a");
    a2a.wait();
    const auto* ao = static_cast<const int32_t*>(a2a.output().tensor.data);
    EXPECT_EQ(ao[0], 0);
    EXPECT_EQ(ao[2], 2);
    EXPECT_EQ(a2a.output().received_splits, (std::vector<int64_t>{1, 1, 1}));
    // Uneven: (d + r) % 3 rows of value 10 r + d go to rank d (some parts empty).
    std::vector<int64_t> splits;
    std::vector<int32_t> rows;
    for (int d = 0; d < n; ++d) {
      splits.push_back((d + r) % 3);
      for (int j = 0; j < splits.back(); ++j) rows.insert(rows.end(), {10 * r + d, 10 * r + d});
    }
    auto uneven = ctx->alltoall_async({rows.data(), collInt32, {static_cast<int64_t>(rows.size() / 2), 2}}, splits, "a2av");
    uneven.wait();
    std::vector<int32_t> expect;
    std::vector<int64_t> expectSplits;
    for (int src = 0; src < n; ++src) {
      expectSplits.push_back((r + src) % 3);
      for (int j = 0; j < expectSplits.back(); ++j) expect.insert(expect.end(), {10 * src + r, 10 * src + r});
    }
    EXPECT_EQ(uneven.output().received_splits, expectSplits);
    const auto* uo = static_cast<const int32_t*>(uneven.output().tensor.data);
    EXPECT_EQ(std::vector<int32_t>(uo, uo + expect.size()), expect);

    std::vector<float> rs(4, static_cast<float>(r));  // 4 rows over 3 ranks: 2, 1, 1
    auto h = ctx->reducescatter_async({rs.data(), collFloat32, {4}}, "rs", {.op = hvd::ReduceOp::Sum});
    h.wait();
    EXPECT_EQ(h.output().tensor.shape[0], r == 0 ? 2 : 1);
    EXPECT_EQ(static_cast<const float*>(h.output().tensor.data)[0], 3.0f);
    ctx->barrier();
  });
}

TEST(Hvd, ProcessSetsJoinAndLayout) {
  const int n = 4;
  withComms(n, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    EXPECT_EQ(ctx->local_size(), n);  // one host
    EXPECT_EQ(ctx->local_rank(), r);
    EXPECT_EQ(ctx->cross_size(), 1);
    EXPECT_EQ(ctx->cross_rank(), 0);
    auto even = ctx->add_process_set({2, 0});
    EXPECT_EQ(ctx->process_set_ranks(even), (std::vector<int>{0, 2}));
    std::vector<float> a(10, static_cast<float>(r)), o(10);
    if (r % 2 == 0) {
      EXPECT_EQ(ctx->process_set_rank(even), r / 2);
      ctx->allreduce_async(view(a), view(o), "ps", {.op = hvd::ReduceOp::Sum, .process_set = even}).wait();
      EXPECT_EQ(o[0], 2.0f);
    } else {
      EXPECT_FALSE(ctx->process_set_included(even));
      EXPECT_THROW(ctx->allreduce_async(view(a), view(o), "ps", {.process_set = even}), hvd::Error);
    }
    // The same name in the global set does not collide with the process set's.
    ctx->allreduce_async(view(a), view(o), "ps", {.op = hvd::ReduceOp::Sum}).wait();
    EXPECT_EQ(o[0], 6.0f);
    ctx->remove_process_set(even);
    // Rank 3 runs out of data first.
    if (r != 3) ctx->allreduce_async(view(a), view(o), "tail", {.op = hvd::ReduceOp::Sum}).wait();
    if (r != 3) {
      EXPECT_EQ(o[0], 3.0f);  // 0 + 1 + 2 + zeros
    }
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // joins last
    EXPECT_EQ(ctx->join(), 1);
  });
}

// init(ranks): a subset of the job becomes the global process set; the others stay out.
TEST(Hvd, ContextFromRankSubset) {
  withComms(3, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_ranks(comm, {0, 2});
    if (r == 1) {
      EXPECT_EQ(ctx, nullptr);
      return;
    }
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(ctx->size(), 2);
    EXPECT_EQ(ctx->rank(), r / 2);
    std::vector<float> a(3, static_cast<float>(r)), o(3);
    ctx->allreduce_async(view(a), view(o), "sub", {.op = hvd::ReduceOp::Sum}).wait();
    EXPECT_EQ(o[2], 2.0f);
  });
}

// The Horovod-style free functions on the process-wide default context.
TEST(Hvd, DefaultContextFreeFunctions) {
  withComms(1, [&](int, collComm_t comm) {
    EXPECT_FALSE(hvd::is_initialized());
    EXPECT_THROW(hvd::size(), hvd::Error);
    hvd::init(comm);
    EXPECT_TRUE(hvd::is_initialized());
    EXPECT_THROW(hvd::init(comm), hvd::Error);  // twice
    EXPECT_EQ(hvd::size(), 1);
    EXPECT_EQ(hvd::rank(), 0);
    EXPECT_EQ(hvd::local_size(), 1);
    std::vector<float> a = {1, 2, 3}, o(3);
    auto h = hvd::allreduce_async(view(a), view(o), "x", {.op = hvd::ReduceOp::Sum, .postscale_factor = 2.0});
    hvd::synchronize(h);
    EXPECT_TRUE(hvd::poll(h));
    EXPECT_EQ(o[2], 6.0f);
    auto g = hvd::allgather({a.data(), collFloat32, {3}}, "g");
    EXPECT_EQ(g.tensor.shape, (std::vector<int64_t>{3}));
    EXPECT_EQ(static_cast<const float*>(g.tensor.data)[1], 2.0f);
    hvd::barrier();
    EXPECT_EQ(hvd::join(), 0);
    hvd::shutdown();
    EXPECT_FALSE(hvd::is_initialized());
    EXPECT_THROW(hvd::Handle().poll(), hvd::Error);
  });
}

TEST(Hvd, StallWarningWithShortLimit) {
  withComms(2, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<float> a(4, 1), o(4);
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    ctx->allreduce_async(view(a), view(o), "late").wait();
    if (r == 0) {
      EXPECT_GE(ctx->stats().stall_warnings, 1u);
    }
  }, {{"COLL_STALL_CHECK_SECONDS", "0.3"}});
}

TEST(Hvd, CompressionAndTimeline) {
  std::string pattern = "/tmp/coll_hvd_tl_" + std::to_string(getpid()) + "_%r.json";
  {
    withComms(2, [&](int r, collComm_t comm) {
      auto ctx = hvd::Context::from_comm(comm);
      const int n = 5000;
      std::vector<float> in(n), o1(n), o2(n), o3(n);
      for (int i = 0; i < n; ++i) in[i] = std::cos(0.003f * i) + 0.5f * r;
      std::vector<hvd::Handle> hs;
      hs.push_back(ctx->allreduce_async(view(in), view(o1), "fp16", {.compression = hvd::Compression::fp16()}));
      hs.push_back(ctx->allreduce_async(view(in), view(o2), "int8", {.compression = hvd::Compression::int8(64)}));
      hs.push_back(ctx->allreduce_async(view(in), view(o3), "topk", {.compression = hvd::Compression::topk(0.05)}));
      for (auto& h : hs) h.wait();
      int nonzero = 0;
      for (int i = 0; i < n; ++i) {
        float expect = std::cos(0.003f * i) + 0.25f;
        ASSERT_NEAR(o1[i], expect, 2e-3) << i;
        ASSERT_NEAR(o2[i], expect, 0.02) << i;
        nonzero += o3[i] != 0.0f;
      }
      EXPECT_GE(nonzero, 250);      // each rank's top 5%: 250 entries (union may be larger)
      EXPECT_LE(nonzero, 2 * 250);
      EXPECT_THROW(ctx->allreduce_async({in.data(), collFloat32, {n}}, {o1.data(), collFloat32, {n}}, "x",
                                        {.op = hvd::ReduceOp::Max, .compression = hvd::Compression::int8()}),
                   hvd::Error);
    }, {{"COLL_TIMELINE", pattern}});
  }
  for (int r = 0; r < 2; ++r) {
    std::string path = pattern;
    path.replace(path.find("%r"), 2, std::to_string(r));
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string text = ss.str();
    EXPECT_TRUE(coll::engine::testing::JsonChecker(text).valid()) << path;
    EXPECT_NE(text.find("\"int8\""), std::string::npos) << path;
    EXPECT_NE(text.find("compress+collective"), std::string::npos) << path;
    unlink(path.c_str());
  }
}

// Without %r only rank 0 writes the timeline. When it could not open the file, rank 0's
// context failed but rank 1 got one whose engine waited for rank 0 in every round: its
// calls ran into COLL_SYNCHRONIZE_TIMEOUT and its shutdown into COLL_TIMEOUT. Now every
// rank's context creation fails, naming the rank and the reason.
TEST(Hvd, UnwritableTimelineFailsContextOnEveryRank) {
  withComms(2, [&](int r, collComm_t comm) {
    try {
      auto ctx = hvd::Context::from_comm(comm);
      std::vector<float> a(4, 1), o(4);
      ctx->allreduce_async(view(a), view(o), "x").wait();
      ADD_FAILURE() << "rank " << r << ": the context works without rank 0's timeline";
    } catch (const hvd::Error& e) {
      EXPECT_EQ(e.code(), collSystemError) << "rank " << r << ": " << e.what();
      std::string want = r == 0 ? "cannot open '/nonexistent-coll-dir/timeline.json'" : "rank 0 cannot open its timeline";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << "rank " << r << ": " << e.what();
    }
  }, {{"COLL_TIMELINE", "/nonexistent-coll-dir/timeline.json"},
      {"COLL_SYNCHRONIZE_TIMEOUT", "2"},  // bounds the test without the fix
      {"COLL_SHUTDOWN_TIMEOUT", "1"},
      {"COLL_TIMEOUT", "3"}});
}

// Error feedback keeps a residual per tensor name. An unnamed tensor is named anew at
// every call, so its residual was never used again and piled up (n floats per call,
// never freed): refused.
TEST(Hvd, CompressionErrorFeedbackNeedsATensorName) {
  withComms(1, [&](int, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<float> in(300, 1.0f), out(300);
    for (auto c : {hvd::Compression::int8(), hvd::Compression::topk(0.1)}) {
      try {
        ctx->allreduce_async(view(in), view(out), "", {.compression = c}).wait();
        ADD_FAILURE() << "unnamed tensor with error feedback accepted";
      } catch (const hvd::Error& e) {
        EXPECT_EQ(e.code(), collInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("name the tensor"), std::string::npos) << e.what();
      }
      EXPECT_THROW(ctx->grouped_allreduce_async({view(in)}, {view(out)}, "", {.compression = c}), hvd::Error);
      c.error_feedback = false;
      ctx->allreduce_async(view(in), view(out), "", {.compression = c}).wait();
    }
    ctx->allreduce_async(view(in), view(out), "", {.compression = hvd::Compression::fp16()}).wait();
    EXPECT_EQ(out[0], 1.0f);
  });
}

// A Rounding value outside the enum was taken silently as Nearest; like a bad
// Compressor value it is refused.
TEST(Hvd, CompressionRoundingMustBeValid) {
  withComms(1, [&](int, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<float> in(300, 1.0f), out(300);
    auto bad = hvd::Compression::int8();
    bad.rounding = static_cast<hvd::Rounding>(7);
    try {
      ctx->allreduce_async(view(in), view(out), "r", {.compression = bad}).wait();
      ADD_FAILURE() << "rounding 7 accepted";
    } catch (const hvd::Error& e) {
      EXPECT_EQ(e.code(), collInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("rounding 7"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
