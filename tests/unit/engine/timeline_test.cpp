// Timeline: valid Chrome-trace JSON with the expected phases, and the stall reporter.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "base/error.hpp"
#include "engine/stall.hpp"
#include "engine/timeline.hpp"
#include "json_check.hpp"

namespace coll::engine {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Timeline, WritesValidChromeTraceJson) {
  std::string path = "/tmp/coll_engine_timeline_" + std::to_string(getpid()) + ".json";
  {
    Timeline t(path, 3);
    auto t0 = Timeline::Clock::now();
    for (const char* phase : {"queue", "negotiate", "copy-in", "collective", "copy-out"})
      t.span("layer1.weight", phase, "allreduce", t0, t0 + std::chrono::microseconds(5));
    t.span("odd \"name\"\\with\ncontrol", "collective", "allgather", t0, t0);
    t.marker("cycle", t0);
  }
  std::string text = readFile(path);
  testing::JsonChecker j(text);
  EXPECT_TRUE(j.valid()) << text;
  // 2 header metadata + 2 track names + 6 spans + 1 marker (each with nested "args" for metadata).
  EXPECT_NE(text.find(R"("name":"copy-in")"), std::string::npos);
  EXPECT_NE(text.find(R"("ph":"X")"), std::string::npos);
  EXPECT_NE(text.find(R"("pid":3)"), std::string::npos);
  EXPECT_NE(text.find(R"(odd \"name\"\\with\u000acontrol)"), std::string::npos) << text;
  unlink(path.c_str());
}

// Idle until started; each start a new, complete file; refusals while recording.
TEST(Timeline, StartsAndStopsAtRunTime) {
  const std::string a = "/tmp/coll_engine_timeline_a_" + std::to_string(getpid()) + ".json";
  const std::string b = "/tmp/coll_engine_timeline_b_" + std::to_string(getpid()) + ".json";
  Timeline t(1);
  EXPECT_FALSE(t.recording());
  auto t0 = Timeline::Clock::now();
  t.span("idle.tensor", "queue", "allreduce", t0, t0);  // dropped: not recording
  t.stop();                                             // nothing to stop
  t.start(a, /*markCycles=*/false);
  EXPECT_TRUE(t.recording());
  try {
    t.start(b, false);
    ADD_FAILURE() << "a second start was accepted";
  } catch (const coll::Error& e) {
    EXPECT_EQ(e.code(), collInvalidUsage);
    EXPECT_NE(std::string(e.what()).find(a), std::string::npos) << e.what();
  }
  t.span("first.tensor", "collective", "allreduce", t0, Timeline::Clock::now());
  t.cycle(Timeline::Clock::now());  // no marker without markCycles
  t.stop();
  EXPECT_FALSE(t.recording());
  t.span("between.tensor", "queue", "allreduce", t0, t0);
  t.start(b, /*markCycles=*/true);
  t.span("second.tensor", "collective", "allgather", Timeline::Clock::now(), Timeline::Clock::now());
  t.cycle(Timeline::Clock::now());
  t.stop();
  EXPECT_THROW(t.start("/nonexistent-coll-dir/t.json", false), coll::Error);
  EXPECT_FALSE(t.recording());

  const std::string first = readFile(a), second = readFile(b);
  EXPECT_TRUE(testing::JsonChecker(first).valid()) << first;
  EXPECT_TRUE(testing::JsonChecker(second).valid()) << second;
  EXPECT_NE(first.find("first.tensor"), std::string::npos) << first;
  EXPECT_EQ(first.find("idle.tensor"), std::string::npos) << first;
  EXPECT_EQ(first.find("\"cycle\""), std::string::npos) << first;
  EXPECT_EQ(second.find("between.tensor"), std::string::npos) << second;
  EXPECT_EQ(second.find("first.tensor"), std::string::npos) << second;
  EXPECT_NE(second.find("second.tensor"), std::string::npos) << second;
  EXPECT_NE(second.find(R"("name":"cycle")"), std::string::npos) << second;
  // The first file's span began before the file: shown from the file's start (ts >= 0).
  EXPECT_EQ(first.find(R"("ts":-)"), std::string::npos) << first;
  unlink(a.c_str());
  unlink(b.c_str());
}

TEST(Timeline, PathPerRank) {
  EXPECT_EQ(Timeline::pathForRank("t.json", 0), "t.json");
  EXPECT_EQ(Timeline::pathForRank("t.json", 1), "");
  EXPECT_EQ(Timeline::pathForRank("t%r.json", 1), "t1.json");
  EXPECT_EQ(Timeline::pathForRank("", 0), "");
}

TEST(JsonChecker, RejectsBrokenJson) {
  for (const char* bad : {"[", "[1,]", "{\"a\" 1}", "[\"x]", "{\"a\":1,}", "[01x]", "[\"\x01\"]"}) {
    std::string s(bad);
    EXPECT_FALSE(testing::JsonChecker(s).valid()) << bad;
  }
  std::string good = R"([{"a":[1,-2.5e3,true,null,"\u00e9"]}])";
  EXPECT_TRUE(testing::JsonChecker(good).valid());
}

// Rank 1 waits in a barrier while ranks 0 and 2 wait in an allreduce: the report on the
// allreduce says where rank 1 is, and the one on the barrier where ranks 0 and 2 are.
TEST(Stall, ReportsWhatEachMissingRankWaitsIn) {
  Negotiator n(3);
  RequestMeta ar;
  ar.name = "grad.fc";
  ar.op = OpType::Allreduce;
  RequestMeta bar;
  bar.name = "barrier.noname.0";
  bar.op = OpType::Barrier;
  n.addRound({{ar}, {bar}, {ar}}, 0.0);
  StallInspector s({/*warnSeconds=*/1.0, /*shutdownSeconds=*/0});
  auto r = s.check(n, 2.0);
  ASSERT_EQ(r.size(), 2u);
  std::string all = r[0] + "\n" + r[1];
  EXPECT_NE(all.find("rank 1 waits in " + std::string(opTypeName(OpType::Barrier)) + " 'barrier.noname.0'"),
            std::string::npos) << all;
  EXPECT_NE(all.find("rank 0 waits in " + std::string(opTypeName(OpType::Allreduce)) + " 'grad.fc'"),
            std::string::npos) << all;
  EXPECT_NE(all.find("rank 2 waits in " + std::string(opTypeName(OpType::Allreduce)) + " 'grad.fc'"),
            std::string::npos) << all;
}

TEST(Stall, ReportsNameAndMissingRanksOncePerPeriod) {
  Negotiator n(3);
  RequestMeta m;
  m.name = "conv1.weight";
  n.addRound({{m}, {}, {m}}, 0.0);
  StallInspector s({/*warnSeconds=*/2.0, /*shutdownSeconds=*/5.0});
  EXPECT_TRUE(s.check(n, 1.0).empty());
  auto r = s.check(n, 2.5);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].find("'conv1.weight'"), std::string::npos) << r[0];
  EXPECT_NE(r[0].find("missing rank(s) 1"), std::string::npos) << r[0];
  EXPECT_NE(r[0].find("submitted by rank(s) 0,2"), std::string::npos) << r[0];
  EXPECT_TRUE(s.check(n, 3.0).empty());  // rate limited
  EXPECT_EQ(s.check(n, 4.6).size(), 1u);
  EXPECT_EQ(s.shutdownReason(n, 4.0), "");
  EXPECT_NE(s.shutdownReason(n, 5.5).find("conv1.weight"), std::string::npos);
}

}  // namespace
}  // namespace coll::engine
