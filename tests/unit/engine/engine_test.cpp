// The engine end to end over simulated ranks (FakeWorld): different submission orders,
// fusion vs reference, cache reuse, mismatches, duplicates, stalls, join.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "base/error.hpp"
#include "engine_harness.hpp"

namespace coll::engine {
namespace {

using testing::arEntry;
using testing::FakeWorld;
using testing::HandlePtr;
using testing::runRanks;
using testing::submit;
using testing::testParams;
using collective::hvd::Error;

// Integer-valued inputs make float sums exact, so results must equal the reference
// bit for bit whatever the fusion did.
float valueOf(int rank, int tensor, int64_t i) { return static_cast<float>((rank + 1) * 1000 + tensor * 7 + i % 13); }

TEST(Engine, DifferentOrdersFuseAndMatchReferenceAndHitCacheOnRepeat) {
  const int ranks = 3, tensors = 40, steps = 3;
  auto world = FakeWorld::create(ranks);
  std::vector<int64_t> sizes;
  for (int t = 0; t < tensors; ++t) sizes.push_back(1 + (t * 37) % 300 + (t % 10 == 0 ? 5000 : 0));
  std::vector<collective::hvd::Stats> stats(ranks);
  runRanks(ranks, [&](int r) {
    EngineParams p = testParams();
    p.fusion.directBytes = 16 << 10;  // the 5000-element tensors run in place
    p.fusionChunkBytes = 3000;         // fused groups go out in several pieces
    Engine eng(world->member(r), p, nullptr, 0);
    std::vector<std::vector<float>> in(tensors), out(tensors);
    for (int t = 0; t < tensors; ++t) {
      in[t].resize(sizes[t]);
      out[t].assign(sizes[t], -1);
      for (int64_t i = 0; i < sizes[t]; ++i) in[t][i] = valueOf(r, t, i);
    }
    std::mt19937 rng(r + 1);
    for (int s = 0; s < steps; ++s) {
      std::vector<int> order(tensors);
      for (int t = 0; t < tensors; ++t) order[t] = t;
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<HandlePtr> hs;
      for (int t : order)
        hs.push_back(submit(eng, arEntry("grad." + std::to_string(t), in[t].data(), out[t].data(), sizes[t])));
      for (auto& h : hs) h->wait();
      for (int t = 0; t < tensors; ++t)
        for (int64_t i = 0; i < sizes[t]; ++i) {
          float expect = 0;
          for (int k = 0; k < ranks; ++k) expect += valueOf(k, t, i);
          ASSERT_EQ(out[t][i], expect) << "rank " << r << " tensor " << t << " i " << i;
        }
    }
    stats[r] = eng.stats();
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(stats[r].negotiated, static_cast<uint64_t>(tensors)) << r;  // first step only
    EXPECT_EQ(stats[r].cache_hits, static_cast<uint64_t>(tensors * (steps - 1))) << r;
    EXPECT_LT(stats[r].collectives, static_cast<uint64_t>(tensors * steps)) << r;  // fused
    EXPECT_GT(stats[r].fused_tensors, 0u);
    EXPECT_EQ(stats[r].collectives, stats[0].collectives);
  }
}

// COLL_FUSION_DIRECT_BYTES=auto: over a fast fake network a 1 MiB tensor runs in place;
// where every collective takes 5 ms, fusing it with a small one saves a round trip, so it
// goes through the buffer. Every rank applies the same threshold, and results stay exact.
TEST(Engine, AutomaticDirectThresholdFollowsMeasuredLatency) {
  const int ranks = 2, steps = 12;
  const int64_t big = 1 << 18, small = 100;  // 1 MiB and 400 bytes of float32
  for (int slow = 0; slow < 2; ++slow) {
    auto world = FakeWorld::create(ranks);
    if (slow) world->setAllreduceDelay(std::chrono::milliseconds(5));
    std::vector<collective::hvd::Stats> before(ranks), after(ranks);
    runRanks(ranks, [&](int r) {
      EngineParams p = testParams();
      p.fusion.directAuto = true;
      p.fusion.directBytes = kDirectBytesFallback;
      Engine eng(world->member(r), p, nullptr, 0);
      std::vector<float> inB(big), outB(big), inS(small), outS(small);
      for (int64_t i = 0; i < big; ++i) inB[i] = valueOf(r, 0, i);
      for (int64_t i = 0; i < small; ++i) inS[i] = valueOf(r, 1, i);
      for (int s = 0; s < steps; ++s) {
        if (s == steps - 1) before[r] = eng.stats();
        auto hb = submit(eng, arEntry("big", inB.data(), outB.data(), big));
        auto hs = submit(eng, arEntry("small", inS.data(), outS.data(), small));
        hb->wait();
        hs->wait();
        for (int64_t i = 0; i < big; i += 101)
          ASSERT_EQ(outB[i], valueOf(0, 0, i) + valueOf(1, 0, i)) << "rank " << r << " step " << s;
        for (int64_t i = 0; i < small; ++i) ASSERT_EQ(outS[i], valueOf(0, 1, i) + valueOf(1, 1, i));
      }
      after[r] = eng.stats();
      eng.shutdown();
    });
    EXPECT_EQ(after[0].direct_bytes, after[1].direct_bytes);
    for (int r = 0; r < ranks; ++r) {
      uint64_t fusedLast = after[r].fused_tensors - before[r].fused_tensors;
      if (slow) {
        EXPECT_GE(after[r].direct_bytes, uint64_t{16} << 20) << "rank " << r;
        EXPECT_EQ(fusedLast, 2u) << "rank " << r << ": with 5 ms per collective both tensors share one";
      } else {
        EXPECT_LT(after[r].direct_bytes, uint64_t{1} << 20) << "rank " << r;
        EXPECT_EQ(fusedLast, 0u) << "rank " << r << ": over a fast network the 1 MiB tensor runs in place";
      }
    }
  }
}

// An engine with nothing to do slows its rounds to COLL_IDLE_CYCLE_TIME after 32 idle
// ones (at 1 ms a 2-rank idle engine used about 5% of a core per rank), and work after a
// quiet spell still completes correctly on every rank.
TEST(Engine, IdleEngineSlowsItsRoundsAndStillServesRequests) {
  const int ranks = 2;
  auto world = FakeWorld::create(ranks);
  std::vector<uint64_t> idleCycles(ranks);
  runRanks(ranks, [&](int r) {
    EngineParams p = testParams();
    p.cycleMs = 1;
    p.idleCycleMs = 50;
    Engine eng(world->member(r), p, nullptr, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    idleCycles[r] = eng.stats().cycles;  // about 32 + 468 / 50; 500 at a steady 1 ms
    for (int k = 0; k < 3; ++k) {
      std::vector<float> in(10, static_cast<float>(r + 1)), out(10, 0);
      auto h = submit(eng, arEntry("after.quiet." + std::to_string(k), in.data(), out.data(), 10));
      h->wait();
      for (float v : out) ASSERT_EQ(v, 3.0f) << "rank " << r;
    }
    eng.shutdown();
  });
  for (int r = 0; r < ranks; ++r) {
    EXPECT_GE(idleCycles[r], 32u) << "rank " << r;
    EXPECT_LE(idleCycles[r], 80u) << "rank " << r << ": an idle engine kept its 1 ms rounds";
  }
}

TEST(Engine, MismatchedShapeFailsOnEveryRankNamingTensorAndRanks) {
  const int ranks = 3;
  auto world = FakeWorld::create(ranks);
  runRanks(ranks, [&](int r) {
    Engine eng(world->member(r), testParams(), nullptr, 0);
    std::vector<float> a(8, 1), out(8);
    // Step 1 caches "w" with 4 elements; step 2 rank 2 changes it (cache path mismatch);
    // "fresh" never cached: rank 1 disagrees from the start.
    for (int step = 0; step < 2; ++step) {
      int64_t n = (step == 1 && r == 2) ? 5 : 4;
      auto h = submit(eng, arEntry("w", a.data(), out.data(), n));
      if (step == 0) {
        h->wait();
        continue;
      }
      try {
        h->wait();
        ADD_FAILURE() << "rank " << r << ": mismatch not reported";
      } catch (const Error& e) {
        std::string m = e.what();
        EXPECT_EQ(e.code(), collInvalidUsage);
        EXPECT_NE(m.find("'w'"), std::string::npos) << m;
        EXPECT_NE(m.find("ranks 0,1 submitted [4]"), std::string::npos) << m;
        EXPECT_NE(m.find("rank 2 submitted [5]"), std::string::npos) << m;
      }
    }
    auto h = submit(eng, arEntry("fresh", a.data(), out.data(), 4, r == 1 ? collMax : collSum));
    EXPECT_THROW(h->wait(), Error);
    // The engine keeps working afterwards.
    submit(eng, arEntry("after", a.data(), out.data(), 8))->wait();
    EXPECT_EQ(out[7], 3.0f);
  });
}

TEST(Engine, DuplicateNameInFlightIsRejected) {
  const int ranks = 2;
  auto world = FakeWorld::create(ranks);
  std::atomic<bool> rank0Checked{false};
  runRanks(ranks, [&](int r) {
    Engine eng(world->member(r), testParams(), nullptr, 0);
    std::vector<float> a(4, 1), out(4);
    if (r == 0) {
      auto h = submit(eng, arEntry("x", a.data(), out.data(), 4));
      try {
        eng.submit(arEntry("x", a.data(), out.data(), 4));
        ADD_FAILURE() << "duplicate accepted";
      } catch (const coll::Error& e) {
        EXPECT_NE(std::string(e.what()).find("'x' is already in flight on rank 0"), std::string::npos) << e.what();
      }
      rank0Checked = true;
      h->wait();
      submit(eng, arEntry("x", a.data(), out.data(), 4))->wait();  // reusable once done
    } else {
      while (!rank0Checked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      submit(eng, arEntry("x", a.data(), out.data(), 4))->wait();
      submit(eng, arEntry("x", a.data(), out.data(), 4))->wait();
    }
    EXPECT_EQ(out[0], 2.0f);
  });
}

TEST(Engine, StallWarningNamesTensorAndMissingRank) {
  const int ranks = 3;
  auto world = FakeWorld::create(ranks);
  std::vector<std::string> reports;
  runRanks(ranks, [&](int r) {
    EngineParams p = testParams();
    p.stall.warnSeconds = 0.3;
    Engine eng(world->member(r), p, nullptr, 0);
    std::vector<float> a(4, 1), out(4);
    // Cache "s" first so that the stalled request starts on the cache path.
    submit(eng, arEntry("s", a.data(), out.data(), 4))->wait();
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    submit(eng, arEntry("s", a.data(), out.data(), 4))->wait();
    EXPECT_EQ(out[0], 3.0f);
    if (r == 0) reports = eng.stallReports();
  });
  ASSERT_FALSE(reports.empty());
  EXPECT_NE(reports[0].find("'s'"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("missing rank(s) 1"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("submitted by rank(s) 0,2"), std::string::npos) << reports[0];
}

TEST(Engine, StallShutdownFailsPendingOnEveryRank) {
  const int ranks = 2;
  auto world = FakeWorld::create(ranks);
  runRanks(ranks, [&](int r) {
    EngineParams p = testParams();
    p.stall.warnSeconds = 0.2;
    p.stall.shutdownSeconds = 0.5;
    Engine eng(world->member(r), p, nullptr, 0);
    std::vector<float> a(4, 1), out(4);
    HandlePtr h = submit(eng, arEntry(r == 0 ? "only0" : "only1", a.data(), out.data(), 4));
    try {
      h->wait();
      ADD_FAILURE() << "stalled tensor completed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), collTimeout) << e.what();
      EXPECT_NE(std::string(e.what()).find("stalled tensor"), std::string::npos) << e.what();
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (eng.running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(eng.running());
    EXPECT_THROW(eng.submit(arEntry("later", a.data(), out.data(), 4)), coll::Error);
  });
}

// One rank's shutdown (it finished, or it failed and is going away) stops every rank's
// engine at the next round: a rank still waiting for that rank's part learns so at once,
// instead of after the shutting-down rank's COLL_SHUTDOWN_TIMEOUT and its own timeouts.
TEST(Engine, ShutdownOnOneRankStopsEveryRank) {
  const int ranks = 3;
  auto world = FakeWorld::create(ranks);
  std::atomic<bool> rank0Down{false};
  runRanks(ranks, [&](int r) {
    EngineParams p = testParams();
    p.shutdownTimeoutSeconds = 5;
    Engine eng(world->member(r), p, nullptr, 0);
    std::vector<float> a(4, static_cast<float>(r + 1)), out(4);
    submit(eng, arEntry("before", a.data(), out.data(), 4))->wait();  // completes everywhere first
    EXPECT_EQ(out[0], 6.0f) << "rank " << r;
    if (r == 0) {
      eng.shutdown();
      EXPECT_FALSE(eng.running());
      rank0Down = true;
      return;
    }
    // Rank 1 submits one rank 0 will never join; rank 2 submits after rank 0 is gone.
    HandlePtr h;
    if (r == 1) h = submit(eng, arEntry("orphan", a.data(), out.data(), 4));
    while (!rank0Down) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
    while (eng.running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(eng.running()) << "rank " << r << ": its engine runs on after rank 0 shut down";
    try {
      if (r == 1) h->wait();
      else submit(eng, arEntry("late", a.data(), out.data(), 4))->wait();
      ADD_FAILURE() << "rank " << r << ": completed without rank 0";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("another rank shut down its engine"), std::string::npos)
          << "rank " << r << ": " << e.what();
    }
  });
}

TEST(Engine, JoinedRankContributesZeros) {
  const int ranks = 3;
  auto world = FakeWorld::create(ranks);
  runRanks(ranks, [&](int r) {
    Engine eng(world->member(r), testParams(), nullptr, 0);
    std::vector<float> a(6, static_cast<float>(r + 1)), out(6);
    // Cache "g" while everyone is active, then rank 2 joins and the others go on.
    submit(eng, arEntry("g", a.data(), out.data(), 6))->wait();
    EXPECT_EQ(out[0], 6.0f);
    auto join = [&] {
      auto e = std::make_unique<Entry>();
      e->meta.name = "__join";
      e->meta.op = OpType::Join;
      e->handle = std::make_shared<collective::hvd::detail::HandleState>(1, 30.0);
      HandlePtr h = e->handle;
      eng.submit(std::move(e));
      h->wait();
      return h->value;
    };
    if (r == 2) {
      EXPECT_EQ(join(), 1);
      return;
    }
    for (int step = 0; step < 2; ++step) {
      submit(eng, arEntry("g", a.data(), out.data(), 6))->wait();  // cached
      EXPECT_EQ(out[5], 3.0f) << "step " << step;
      submit(eng, arEntry("new" + std::to_string(step), a.data(), out.data(), 6, collAvg))->wait();
      EXPECT_EQ(out[5], 1.0f);  // (1 + 2 + 0) / 3
    }
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // joins last
    EXPECT_EQ(join(), 1);
  });
}

// A joined rank sends from shared zeros. In one round, in-place all-reduces of growing
// sizes are all issued before the first is waited on; the zeros for a larger one used to
// replace (and free) those a smaller one was still sending from, so the others summed
// freed memory. The fake reads inputs only at wait time, as a transport may.
TEST(Engine, JoinedRankZerosOutliveLargerAllreducesOfTheSameRound) {
  const int ranks = 3, tensors = 6;
  auto world = FakeWorld::create(ranks);
  world->setDeferredAllreduce(true);
  runRanks(ranks, [&](int r) {
    EngineParams p = testParams();
    p.fusion.directBytes = 1;  // every tensor in place, none through the fusion buffer
    p.cycleMs = 20;            // the growing tensors meet in one round
    Engine eng(world->member(r), p, nullptr, 0);
    auto join = [&] {
      auto e = std::make_unique<Entry>();
      e->meta.name = "__join";
      e->meta.op = OpType::Join;
      e->handle = std::make_shared<collective::hvd::detail::HandleState>(1, 30.0);
      HandlePtr h = e->handle;
      eng.submit(std::move(e));
      h->wait();
      return h->value;
    };
    if (r == 2) {
      EXPECT_EQ(join(), 1);
      return;
    }
    std::vector<std::vector<float>> in(tensors), out(tensors);
    std::vector<HandlePtr> hs;
    for (int t = 0; t < tensors; ++t) {
      int64_t n = int64_t{8} << (2 * t);  // 8 .. 8192 elements
      in[t].assign(n, static_cast<float>(r + 1));
      out[t].assign(n, -1);
      hs.push_back(submit(eng, arEntry("grow." + std::to_string(t), in[t].data(), out[t].data(), n)));
    }
    for (auto& h : hs) h->wait();
    for (int t = 0; t < tensors; ++t)
      for (size_t i = 0; i < out[t].size(); ++i)
        ASSERT_EQ(out[t][i], 3.0f) << "rank " << r << " tensor " << t << " element " << i;
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // joins last
    EXPECT_EQ(join(), 1);
  });
}

// Zeros from a joined rank would change a Min, Max or Product, so the negotiation refuses
// those. A cached one used to run anyway: the joined rank stood in for every cached
// allreduce, and Max over {-5, -5, 0} gave 0.
TEST(Engine, JoinedRankRefusesCachedMaxAllreduce) {
  const int ranks = 3;
  auto world = FakeWorld::create(ranks);
  runRanks(ranks, [&](int r) {
    Engine eng(world->member(r), testParams(), nullptr, 0);
    std::vector<float> a(6, -5), out(6);
    submit(eng, arEntry("m", a.data(), out.data(), 6, collMax))->wait();  // cached
    EXPECT_EQ(out[0], -5.0f);
    auto e = std::make_unique<Entry>();
    e->meta.name = "__join";
    e->meta.op = OpType::Join;
    e->handle = std::make_shared<collective::hvd::detail::HandleState>(1, 30.0);
    HandlePtr join = e->handle;
    if (r == 2) {
      eng.submit(std::move(e));
      join->wait();
      return;
    }
    std::fill(out.begin(), out.end(), 7.0f);
    try {
      submit(eng, arEntry("m", a.data(), out.data(), 6, collMax))->wait();
      ADD_FAILURE() << "rank " << r << ": Max ran with a joined rank and gave " << out[0];
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), collInvalidUsage);
      EXPECT_NE(std::string(err.what()).find("rank 2 joined"), std::string::npos) << err.what();
    }
    eng.submit(std::move(e));
    join->wait();
  });
}

TEST(Engine, GroupedMembersCompleteTogether) {
  const int ranks = 2;
  auto world = FakeWorld::create(ranks);
  runRanks(ranks, [&](int r) {
    Engine eng(world->member(r), testParams(), nullptr, 0);
    std::vector<float> a(10, 2), b(3, 5), oa(10), ob(3);
    auto h = std::make_shared<collective::hvd::detail::HandleState>(2, 30.0);
    std::vector<EntryPtr> es;
    es.push_back(arEntry("grp.0", a.data(), oa.data(), 10, collSum, h));
    es.push_back(arEntry("grp.1", b.data(), ob.data(), 3, collSum, h));
    for (auto& e : es) {
      e->meta.group = "grp";
      e->meta.groupSize = 2;
    }
    if (r == 1) std::reverse(es.begin(), es.end());
    eng.submitAll(std::move(es));
    h->wait();
    EXPECT_EQ(oa[9], 4.0f);
    EXPECT_EQ(ob[2], 10.0f);
  });
}


// A group whose members the response cache holds only in part (it is full, or one member's
// request changed since it was cached) used to split: the cached members ran as hits while
// the rest waited in the negotiation for siblings that never came, and the handle hung.
TEST(Engine, GroupedMembersPartlyCachedStillComplete) {
  const int ranks = 2, steps = 3;
  for (size_t capacity : {size_t{1}, size_t{1024}}) {
    auto world = FakeWorld::create(ranks);
    runRanks(ranks, [&](int r) {
      EngineParams p = testParams();
      p.cacheCapacity = capacity;
      Engine eng(world->member(r), p, nullptr, 0);
      std::vector<float> a(10, 2), b(3, 5), oa(10), ob(3);
      for (int s = 0; s < steps; ++s) {
        // With a roomy cache, the first member's shape changes in the last step.
        int64_t na = capacity > 1 && s == steps - 1 ? 9 : 10;
        auto h = std::make_shared<collective::hvd::detail::HandleState>(2, 5.0);
        std::vector<EntryPtr> es;
        es.push_back(arEntry("grp.0", a.data(), oa.data(), na, collSum, h));
        es.push_back(arEntry("grp.1", b.data(), ob.data(), 3, collSum, h));
        for (auto& e : es) {
          e->meta.group = "grp";
          e->meta.groupSize = 2;
        }
        eng.submitAll(std::move(es));
        ASSERT_NO_THROW(h->wait()) << "capacity " << capacity << " rank " << r << " step " << s;
        EXPECT_EQ(oa[na - 1], 4.0f);
        EXPECT_EQ(ob[2], 10.0f);
      }
    });
  }
}

}  // namespace
}  // namespace coll::engine
