// The call sequences (sequences.hpp) on ranks that are threads of this process, as
// GoogleTest checks: used by collectives-sequences and by the InfiniBand backend's tests
// (tests/unit/net_ib), which run them over the fake verbs fabric.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "sequences.hpp"

namespace testing_coll::seq {

// Runs `steps` random steps on n ranks (threads) and checks every result on every rank,
// and that every rank's all-reduce output has the same bits.
// COLL_TEST_SEQ_SEED=S runs another sequence (S mixed with the test's own seed), and
// COLL_TEST_SEQ_STEPS=N another length, for exploring; the test prints both.
inline void runSequence(int n, uint64_t seed, int steps, const Tunables& tunables = {}) {
  if (const char* s = getenv("COLL_TEST_SEQ_SEED")) seed = seed * 1000003u + strtoull(s, nullptr, 10);
  if (const char* s = getenv("COLL_TEST_SEQ_STEPS")) steps = atoi(s);
  Tunables t = tunables;
  t.emplace_back("COLL_TIMEOUT", "60");
  Job job(n, t);
  ASSERT_TRUE(job.ok());
  Failures fails;
  const std::vector<uint64_t> seeds = stepSeeds(seed, steps);
  size_t checked[static_cast<int>(K::Count)] = {}, bytes = 0;
  int groups = 0, nonblocking = 0, splits = 0, refused = 0;
  for (int step = 0; step < steps && fails.count == 0; ++step) {
    std::vector<StepOut> outs(n);
    job.run([&](int r, collComm_t world) {
      const std::string where = "step " + std::to_string(step) + " rank " + std::to_string(r) + ": ";
      runStep(seeds[step], world, r, n, where, outs[r], [&](const std::string& m) { fails.add(m); });
      if (outs[r].sub && collCommDestroy(outs[r].sub) != collSuccess) fails.add(where + "destroying the split communicator");
    });
    const StepOut& o0 = outs[0];
    for (int r = 0; r < n && fails.count == 0; ++r)
      for (size_t i = 0; i < outs[r].calls.size(); ++i) {
        const Call& c = outs[r].calls[i];
        const std::string bad = check(c, outs[r].rank, outs[r].size, *outs[r].bufs[i]);
        ++checked[static_cast<int>(c.k)];
        bytes += outs[r].bufs[i]->b.size();
        if (!bad.empty())
          fails.add("step " + std::to_string(step) + " rank " + std::to_string(r) + (o0.split ? " (split)" : "") + ": " +
                    describe(c) + ": " + bad);
      }
    groups += groupStep(o0.mode);
    nonblocking += nonblockingStep(o0.mode);
    splits += o0.split;
    refused += badArgStep(o0.mode);
    // Bit-identical all-reduce results on every rank of a communicator.
    for (int r = 1; r < n && fails.count == 0; ++r) {
      const int first = o0.split ? r % 2 : 0;
      if (first == r) continue;
      for (size_t i = 0; i < outs[r].calls.size(); ++i) {
        const Call& c = outs[r].calls[i];
        const size_t len = c.count * collTypeSize(c.dt);
        if (c.k == K::AllReduce && memcmp(outs[r].bufs[i]->recv, outs[first].bufs[i]->recv, len) != 0)
          fails.add("step " + std::to_string(step) + ": all-reduce bits differ between ranks " + std::to_string(first) +
                    " and " + std::to_string(r) + ": " + describe(c));
      }
    }
  }
  EXPECT_EQ(fails.count, 0);
  std::string kinds;
  for (int k = 0; k < static_cast<int>(K::Count); ++k) kinds += std::string(" ") + kNames[k] + "=" + std::to_string(checked[k]);
  printf("seed %llu, %d ranks, %d steps: %d grouped, %d nonblocking, %d on split communicators, %d bad arguments refused; "
         "results checked (rank-calls):%s; %.1f MB of outputs\n",
         static_cast<unsigned long long>(seed), n, steps, groups, nonblocking, splits, refused, kinds.c_str(), bytes / 1e6);
}

// A rank whose last calls only send (a broadcast's root, a gather's non-root) finishes
// first and destroys its communicator while the others still receive: what it sent must
// still arrive. (The in-memory network backend of the tests once refused a receive posted
// after the sender had closed, although the message was queued; the sequences above
// found it.)
inline void checkLeftEarly(const Tunables& tunables = {}) {
  Tunables t = tunables;
  t.emplace_back("COLL_TIMEOUT", "30");
  Job job(3, t);
  ASSERT_TRUE(job.ok());
  std::vector<std::vector<int32_t>> got(3, std::vector<int32_t>(64, -1)), gathered(3, std::vector<int32_t>(48, -1));
  std::vector<collResult_t> rc(3, collSuccess);
  job.run([&](int r, collComm_t comm) {
    std::vector<int32_t> mine(64), block(16);
    for (int i = 0; i < 64; ++i) mine[i] = 1000 * r + i;
    for (int i = 0; i < 16; ++i) block[i] = 100 * r + i;
    if (r == 2) {  // sends, then leaves at once
      rc[r] = collBroadcast(mine.data(), got[r].data(), 64, collInt32, 2, comm, nullptr);
      if (rc[r] == collSuccess) rc[r] = collGather(block.data(), nullptr, 16, collInt32, 0, comm, nullptr);
      if (rc[r] == collSuccess) rc[r] = collCommDestroy(comm);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    rc[r] = collBroadcast(mine.data(), got[r].data(), 64, collInt32, 2, comm, nullptr);
    if (rc[r] == collSuccess)
      rc[r] = collGather(block.data(), r == 0 ? gathered[r].data() : nullptr, 16, collInt32, 0, comm, nullptr);
  });
  job.forget(2);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(rc[r], collSuccess) << "rank " << r << ": " << collGetLastError(job.comm(r));
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 64; ++i) ASSERT_EQ(got[r][i], 2000 + i) << "rank " << r << " element " << i;
  for (int p = 0; p < 3; ++p)
    for (int i = 0; i < 16; ++i) ASSERT_EQ(gathered[0][16 * p + i], 100 * p + i) << "block " << p;
}

}  // namespace testing_coll::seq
