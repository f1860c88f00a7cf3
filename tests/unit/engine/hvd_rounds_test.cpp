// The engine's rounds run by callers that wait on their results (Engine::driveOnce,
// COLL_ENGINE_CALLER_ROUNDS) over real communicators, ranks as threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collective.h"
#include "collective/hvd.hpp"
#include "hvd_harness.hpp"

namespace hvd = collective::hvd;
using namespace hvdtest;

namespace {

// Blocking calls run the engine's rounds in the caller's own thread (caller_rounds counts
// them); with COLL_ENGINE_CALLER_ROUNDS=0 every round is the engine thread's. Each result
// is checked exactly, either way.
void blockingCalls(int r, collComm_t comm, int n, bool expectCallerRounds) {
  auto ctx = hvd::Context::from_comm(comm);
  std::vector<float> v(33);
  for (int i = 0; i < 200; ++i) {
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(r * 1000 + i + static_cast<int>(k));
    ctx->allreduce_async(view(v), view(v), "blocking", {.op = hvd::ReduceOp::Sum}).wait();
    for (size_t k = 0; k < v.size(); ++k)
      ASSERT_EQ(v[k], static_cast<float>(1000 * n * (n - 1) / 2 + n * (i + static_cast<int>(k))))
          << "call " << i << " element " << k;
  }
  const hvd::Stats s = ctx->stats();
  if (expectCallerRounds) {
    EXPECT_GT(s.caller_rounds, 0u) << "rank " << r;
  } else {
    EXPECT_EQ(s.caller_rounds, 0u) << "rank " << r;
  }
  EXPECT_LE(s.caller_rounds, s.cycles);
}

}  // namespace

TEST(Hvd, WaitingCallersRunTheRoundsThemselves) {
  for (int n : {2, 3}) withComms(n, [&](int r, collComm_t comm) { blockingCalls(r, comm, n, true); });
  withComms(2, [&](int r, collComm_t comm) { blockingCalls(r, comm, 2, false); }, {{"COLL_ENGINE_CALLER_ROUNDS", "0"}});
}

TEST(Hvd, CallerRoundsSettingMustBeZeroOrOne) {
  withComms(1, [&](int, collComm_t comm) {
    try {
      auto ctx = hvd::Context::from_comm(comm);
      ADD_FAILURE() << "COLL_ENGINE_CALLER_ROUNDS=2 accepted";
    } catch (const hvd::Error& e) {
      EXPECT_EQ(e.code(), collInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("COLL_ENGINE_CALLER_ROUNDS=2 must be 0 or 1"), std::string::npos)
          << e.what();
    }
  }, {{"COLL_ENGINE_CALLER_ROUNDS", "2"}});
}

// Several threads of each rank wait on their own tensors at once while another submits
// without waiting (only the engine's thread, or another caller's round, can finish its
// work): whichever thread runs a round, every result is right and nothing hangs.
TEST(Hvd, ManyThreadsWaitingOnOneEngine) {
  const int n = 2, threads = 4, calls = 60;
  withComms(n, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::vector<std::thread> ts;
    std::vector<std::string> errors(threads + 1);
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        try {
          std::vector<float> v(17 + t);
          for (int i = 0; i < calls; ++i) {
            std::fill(v.begin(), v.end(), static_cast<float>(r + t * 100 + i));
            ctx->allreduce_async(view(v), view(v), "thread" + std::to_string(t) + "." + std::to_string(i),
                                 {.op = hvd::ReduceOp::Sum})
                .wait();
            const float want = static_cast<float>(n * (t * 100 + i) + n * (n - 1) / 2);
            for (float x : v)
              if (x != want) throw std::runtime_error("thread " + std::to_string(t) + " call " + std::to_string(i) +
                                                      ": " + std::to_string(x) + " != " + std::to_string(want));
          }
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    ts.emplace_back([&] {
      try {
        std::vector<std::vector<float>> vs(calls, std::vector<float>(5));
        std::vector<hvd::Handle> hs;
        for (int i = 0; i < calls; ++i) {
          std::fill(vs[i].begin(), vs[i].end(), static_cast<float>(r * 7 + i));
          hs.push_back(ctx->allreduce_async(view(vs[i]), view(vs[i]), "polled." + std::to_string(i),
                                            {.op = hvd::ReduceOp::Sum}));
        }
        for (auto& h : hs)
          while (!h.poll()) std::this_thread::sleep_for(std::chrono::microseconds(200));
        for (int i = 0; i < calls; ++i)
          for (float x : vs[i])
            if (x != static_cast<float>(n * i + 7 * n * (n - 1) / 2))
              throw std::runtime_error("polled tensor " + std::to_string(i) + " wrong");
      } catch (const std::exception& e) {
        errors[threads] = e.what();
      }
    });
    for (auto& t : ts) t.join();
    for (size_t t = 0; t < errors.size(); ++t) EXPECT_EQ(errors[t], "") << "rank " << r << " thread " << t;
  });
}

// A thread inside collGroupStart/End must not run rounds (the round's collectives would
// join its group and never run): its blocking engine call is finished by the engine's
// own thread instead.
TEST(Hvd, CallerInsideAGroupLeavesTheRoundsToTheEngine) {
  withComms(2, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    ASSERT_EQ(collGroupStart(), collSuccess);
    std::vector<float> v(9, static_cast<float>(r + 1));
    ctx->allreduce_async(view(v), view(v), "in-group", {.op = hvd::ReduceOp::Sum}).wait();
    ASSERT_EQ(collGroupEnd(), collSuccess);
    for (float x : v) EXPECT_EQ(x, 3.0f);
    EXPECT_EQ(ctx->stats().caller_rounds, 0u);
  });
}

// A caller waiting (and maybe running rounds) on a tensor that the other rank never
// submits gets the shutdown's error when its context shuts down, instead of hanging or crashing.
TEST(Hvd, ShutdownEndsACallerThatRunsRounds) {
  withComms(2, [&](int r, collComm_t comm) {
    auto ctx = hvd::Context::from_comm(comm);
    std::string got;
    std::thread waiter;
    if (r == 0)
      waiter = std::thread([&] {
        std::vector<float> v(4, 1.0f);
        try {
          ctx->allreduce_async(view(v), view(v), "never-on-rank-1", {.op = hvd::ReduceOp::Sum}).wait();
          got = "completed";
        } catch (const hvd::Error& e) {
          got = e.what();
        }
      });
    // (Whether the waiter is running a round or sleeping on its handle, having found the
    // engine's thread in one, depends on timing; either way it must end with the error.)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ctx->shutdown();
    if (waiter.joinable()) waiter.join();
    if (r == 0) EXPECT_NE(got.find("shut down"), std::string::npos) << got;
  });
}
