// The pipelined ring (algorithms/ring_stream) over a permuted ring order, as topology-
// aware rings run it: all-reduce, all-gather and reduce-scatter schedules driven directly
// on each rank's communicator, against the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "../collectives/harness.hpp"
#include "algo_check.hpp"
#include "algorithms/ring_stream.hpp"
#include "comm/handles.hpp"

using namespace testing_coll;

namespace {

std::vector<int> shuffled(int n, unsigned seed) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  return order;
}

class RingOrder : public ::testing::TestWithParam<int> {};

TEST_P(RingOrder, PermutedRingsMatchTheReference) {
  const int n = GetParam();
  Job job(n, {{"COLL_CHUNK_BYTES", "512"}});  // several chunks per block
  ASSERT_TRUE(job.ok());
  const std::vector<int> order = shuffled(n, 1000 + n);
  const size_t count = 3 * 512 / 4 * n + 3;  // uneven blocks of a few chunks each
  std::vector<std::vector<float>> allReduced(n);
  job.run([&](int r, collComm_t handle) {
    coll::Comm& comm = *coll::liveComm(handle).impl;
    const int pos = static_cast<int>(std::find(order.begin(), order.end(), r) - order.begin());
    const size_t es = sizeof(float);
    // All-reduce: blocks by position.
    std::vector<float> in(count), out(count);
    fillRank(in.data(), 0, count, collFloat32, collSum, 1, r);
    coll::RingStream ar;
    ar.order = order.data();
    ar.blocks = coll::Blocks::split(count, n);
    ar.base = pos;
    ar.steps = 2 * (n - 1);
    ar.reduceSteps = n - 1;
    ar.local = reinterpret_cast<const char*>(in.data());
    ar.firstSrc = ar.local + ar.blocks.off(pos) * es;
    ar.dstBase = reinterpret_cast<char*>(out.data());
    coll::Progress pg(comm, "test ring");
    coll::runRingStream(comm, pg, ar);
    EXPECT_EQ(firstWrong(out.data(), 0, count, collFloat32, collSum, 1, n), -1) << "all-reduce, rank " << r;
    allReduced[r] = out;
    // All-gather: block of position p belongs to rank order[p].
    std::vector<float> gathered(count * n);
    fillRank(gathered.data() + r * count, 0, count, collFloat32, collSum, 2, r);
    coll::RingStream ag;
    ag.order = order.data();
    ag.blocksFollowRanks = true;
    ag.blocks = coll::Blocks::equal(count);
    ag.base = pos;
    ag.steps = n - 1;
    ag.firstSrc = reinterpret_cast<const char*>(gathered.data() + r * count);
    ag.dstBase = reinterpret_cast<char*>(gathered.data());
    coll::runRingStream(comm, pg, ag);
    for (int p = 0; p < n; ++p) {
      std::vector<float> want(count);
      fillRank(want.data(), 0, count, collFloat32, collSum, 2, p);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), gathered.begin() + p * count)) << "all-gather block " << p;
    }
    // Reduce-scatter: this rank ends with its own block.
    std::vector<float> rsIn(count * n), rsOut(count), partial(count * n);
    fillRank(rsIn.data(), 0, count * n, collFloat32, collSum, 3, r);
    coll::RingStream rs;
    rs.order = order.data();
    rs.blocksFollowRanks = true;
    rs.blocks = coll::Blocks::equal(count);
    rs.base = (pos + n - 1) % n;
    rs.steps = rs.reduceSteps = n - 1;
    rs.local = reinterpret_cast<const char*>(rsIn.data());
    rs.firstSrc = rs.local + rs.blocks.off(order[rs.base]) * es;
    rs.dstBase = reinterpret_cast<char*>(partial.data());
    rs.redirectBlock = r;
    rs.redirectPtr = reinterpret_cast<char*>(rsOut.data());
    coll::runRingStream(comm, pg, rs);
    EXPECT_EQ(firstWrong(rsOut.data(), r * count, count, collFloat32, collSum, 3, n), -1) << "reduce-scatter, rank " << r;
  });
  for (int r = 1; r < n; ++r) EXPECT_TRUE(allReduced[r] == allReduced[0]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingOrder, ::testing::Values(2, 3, 5, 8));

}  // namespace
