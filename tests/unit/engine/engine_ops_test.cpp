// The engine's other operations over simulated ranks: allgather, alltoall, reducescatter,
// broadcast, compressed allreduce, and the timeline it writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "base/error.hpp"
#include "engine_harness.hpp"
#include "json_check.hpp"

namespace coll::engine {
namespace {

using testing::arEntry;
using testing::FakeWorld;
using testing::HandlePtr;
using testing::runRanks;
using testing::submit;
using testing::testParams;

EntryPtr entry(OpType op, const std::string& name, const void* in, std::vector<int64_t> shape,
               collDataType_t dt = collInt32) {
  auto e = std::make_unique<Entry>();
  e->meta.name = name;
  e->meta.op = op;
  e->meta.dtype = dt;
  e->meta.shape = std::move(shape);
  e->input = in;
  e->handle = std::make_shared<collective::hvd::detail::HandleState>(1, 30.0);
  return e;
}

TEST(EngineOps, AllgatherWithDifferentFirstDimensions) {
  const int ranks = 3;
  auto world = FakeWorld::create(ranks);
  runRanks(ranks, [&](int r) {
    Engine eng(world->member(r), testParams(), nullptr, 0);
    for (int step = 0; step < 2; ++step) {  // second step through the cache
      int64_t rows = r + 1 + step;          // ranks differ, and change between steps
      std::vector<int32_t> in(rows * 2);
      for (int64_t i = 0; i < rows * 2; ++i) in[i] = r * 100 + static_cast<int32_t>(i);
      HandlePtr h = submit(eng, entry(OpType::Allgather, "ag", in.data(), {rows, 2}));
      h->wait();
      const auto& out = h->output;
      int64_t total = 0;
      for (int k = 0; k < ranks; ++k) total += k + 1 + step;
      ASSERT_EQ(out.tensor.shape, (std::vector<int64_t>{total, 2}));
      const auto* o = static_cast<const int32_t*>(out.tensor.data);
      int64_t at = 0;
      for (int k = 0; k < ranks; ++k)
        for (int64_t i = 0; i < (k + 1 + step) * 2; ++i) ASSERT_EQ(o[at++], k * 100 + i) << k << " " << i;
    }
  });
}

TEST(EngineOps, AlltoallWithSplits) {
  const int ranks = 3;
  auto world = FakeWorld::create(ranks);
  runRanks(ranks, [&](int r) {
    Engine eng(world->member(r), testParams(), nullptr, 0);
    // Rank r sends (d + r) % 3 rows to rank d; a row is [r, d, j].
    std::vector<int64_t> splits(ranks);
    std::vector<int32_t> in;
    for (int d = 0; d < ranks; ++d) {
      splits[d] = (d + r) % 3;
      for (int j = 0; j < splits[d]; ++j) in.insert(in.end(), {r, d, j});
    }
    auto e = entry(OpType::Alltoall, "a2a", in.data(), {static_cast<int64_t>(in.size() / 3), 3});
    e->meta.splits = splits;
    HandlePtr h = submit(eng, std::move(e));
    h->wait();
    const auto& out = h->output;
    std::vector<int64_t> expectSplits;
    for (int s = 0; s < ranks; ++s) expectSplits.push_back((r + s) % 3);
    EXPECT_EQ(out.received_splits, expectSplits);
    const auto* o = static_cast<const int32_t*>(out.tensor.data);
    int64_t row = 0;
    for (int s = 0; s < ranks; ++s)
      for (int j = 0; j < expectSplits[s]; ++j, ++row) {
        ASSERT_EQ(o[row * 3], s);
        ASSERT_EQ(o[row * 3 + 1], r);
        ASSERT_EQ(o[row * 3 + 2], j);
      }
    EXPECT_EQ(out.tensor.shape[0], row);
  });
}

TEST(EngineOps, ReducescatterUnevenRowsWithScaling) {
  const int ranks = 3;
  auto world = FakeWorld::create(ranks);
  runRanks(ranks, [&](int r) {
    Engine eng(world->member(r), testParams(), nullptr, 0);
    const int64_t rows = 7, cols = 2;  // 3, 2, 2 rows
    std::vector<float> in(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i) in[i] = static_cast<float>(i + r);
    auto e = entry(OpType::Reducescatter, "rs", in.data(), {rows, cols}, collFloat32);
    e->meta.redOp = collSum;
    e->meta.prescale = 2.0;
    e->meta.postscale = 0.5;
    HandlePtr h = submit(eng, std::move(e));
    h->wait();
    const auto& t = h->output.tensor;
    int64_t myRows = r == 0 ? 3 : 2, first = r == 0 ? 0 : (r == 1 ? 3 : 5);
    ASSERT_EQ(t.shape, (std::vector<int64_t>{myRows, cols}));
    const auto* o = static_cast<const float*>(t.data);
    for (int64_t i = 0; i < myRows * cols; ++i) {
      int64_t g = first * cols + i;
      float expect = 0;
      for (int k = 0; k < ranks; ++k) expect += 2.0f * static_cast<float>(g + k);
      ASSERT_EQ(o[i], expect * 0.5f) << i;
    }
  });
}

TEST(EngineOps, BroadcastFusedAndDirect) {
  const int ranks = 3;
  auto world = FakeWorld::create(ranks);
  runRanks(ranks, [&](int r) {
    Engine eng(world->member(r), testParams(), nullptr, 0);
    std::vector<std::vector<int32_t>> bufs;
    std::vector<HandlePtr> hs;
    for (int t = 0; t < 5; ++t) {
      bufs.emplace_back(10 + t, r == 1 ? 1000 + t : -1);
      auto e = entry(OpType::Broadcast, "b" + std::to_string(t), bufs[t].data(), {10 + t});
      e->output = bufs[t].data();
      e->meta.root = 1;
      hs.push_back(submit(eng, std::move(e)));
    }
    for (auto& h : hs) h->wait();
    for (int t = 0; t < 5; ++t)
      for (int32_t v : bufs[t]) ASSERT_EQ(v, 1000 + t);
  });
}

TEST(EngineOps, CompressedAllreduceThroughEngine) {
  const int ranks = 2;
  auto world = FakeWorld::create(ranks);
  runRanks(ranks, [&](int r) {
    Engine eng(world->member(r), testParams(), nullptr, 0);
    const int n = 3000;
    std::vector<float> in(n), out16(n), out8(n), outk(n);
    for (int i = 0; i < n; ++i) in[i] = std::sin(0.01f * i) * (r + 1);
    auto mk = [&](const char* name, float* out, CompressKind k) {
      auto e = arEntry(name, in.data(), out, n, collAvg);
      e->meta.compression.kind = k;
      e->meta.compression.blockSize = 128;
      e->meta.compression.density = 1.0;  // top-k of everything: exact
      return submit(eng, std::move(e));
    };
    auto h1 = mk("c16", out16.data(), CompressKind::FP16);
    auto h2 = mk("c8", out8.data(), CompressKind::Int8);
    auto h3 = mk("ck", outk.data(), CompressKind::TopK);
    h1->wait();
    h2->wait();
    h3->wait();
    for (int i = 0; i < n; ++i) {
      float expect = std::sin(0.01f * i) * 1.5f;
      ASSERT_NEAR(out16[i], expect, 2e-3) << i;
      ASSERT_NEAR(out8[i], expect, 0.03) << i;
      ASSERT_NEAR(outk[i], expect, 1e-6) << i;
    }
  });
}

TEST(EngineOps, TimelineHasEveryPhasePerTensor) {
  const int ranks = 2;
  auto world = FakeWorld::create(ranks);
  std::string path = "/tmp/coll_engine_tl_" + std::to_string(getpid()) + ".json";
  runRanks(ranks, [&](int r) {
    std::unique_ptr<Timeline> tl;
    if (r == 0) tl = std::make_unique<Timeline>(path, 0);
    {
      Engine eng(world->member(r), testParams(), tl.get(), 0);
      std::vector<float> a(64, 1), o1(64), o2(64);
      auto h1 = submit(eng, arEntry("fc.weight", a.data(), o1.data(), 64));
      auto h2 = submit(eng, arEntry("fc.bias", a.data(), o2.data(), 16));
      h1->wait();
      h2->wait();
    }
  });
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  testing::JsonChecker j(text);
  EXPECT_TRUE(j.valid()) << text;
  for (const char* s : {"\"fc.weight\"", "\"fc.bias\"", "\"queue\"", "\"negotiate\"", "\"copy-in\"",
                        "\"collective\"", "\"copy-out\""})
    EXPECT_NE(text.find(s), std::string::npos) << s;
  unlink(path.c_str());
}

}  // namespace
}  // namespace coll::engine
