// Every collective with every forced algorithm across uneven simulated hosts (one process
// per rank, COLL_HOST_ID per host): hosts of different sizes, hosts interleaved in rank
// order, one rank per host. Results against the reference, in place and out of place,
// non-zero roots, and bit for bit across ranks, also for float sums whose value depends on
// the order of the additions. Also sub-communicators across hosts, ranks pinned so that a
// host's ring order and leader differ from its rank order, nonblocking ops and groups in
// flight together, and NULL for buffers a call does not use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "algo_check.hpp"
#include "proc_job.hpp"

using namespace testing_coll;

namespace {

constexpr collDataType_t kLayoutTypes[] = {collInt8, collUint8, collInt64, collFloat16, collBfloat16, collFloat64};

// Element i of rank r for the order-sensitive sums: huge values that cancel and small ones.
double cancelling(int r, size_t i) {
  switch ((r + i) % 4) {
    case 0: return 1e30;
    case 1: return -1e30;
    case 2: return 1.0 + static_cast<double>(i % 7) * 0.1;
    default: return 3.0e-3 * static_cast<double>(r + 1);
  }
}
double cancellingHalf(int r, size_t i) {
  switch ((r + i) % 4) {
    case 0: return 60000.0;
    case 1: return -60000.0;
    case 2: return 1.0 + static_cast<double>(i % 7) * 0.1;
    default: return 1.0e-3 * static_cast<double>(r + 1);
  }
}

// One rank's side: every collective for one (type, count, op) (RankCalls, with
// all-to-all), order-sensitive float sums, and large buffers.
class Checks : public RankCalls {
 public:
  Checks(int r, int n, collComm_t comm, std::vector<uint64_t>& same) : RankCalls(r, n, comm, same, true) {}
  int fails = 0;

  // Float sums whose value depends on the order: every rank must get the same bits, and a
  // repeated call the same bits again.
  bool orderSensitive(collDataType_t dt, size_t count) {
    const size_t es = collTypeSize(dt), bytes = count * es;
    std::vector<char> in(bytes * n_ + 1), out(bytes * n_ + 1), again(bytes * n_ + 1);
    for (size_t i = 0; i < count * n_; ++i)
      storeValue(in.data(), i, dt, dt == collFloat64 ? cancelling(r_, i) : cancellingHalf(r_, i));
    for (char* o : {out.data(), again.data()})
      if (!ok("allreduce(cancel)", collAllReduce(in.data(), o, count, dt, collSum, comm_, nullptr), dt, collSum, count))
        return false;
    hashes_.push_back(hashBytes(out.data(), bytes));
    if (memcmp(out.data(), again.data(), bytes) != 0)
      fail("allreduce(cancel)", dt, collSum, count, false, "repeated call differs");
    for (char* o : {out.data(), again.data()})
      if (!ok("reducescatter(cancel)", collReduceScatter(in.data(), o, count, dt, collSum, comm_, nullptr), dt, collSum,
              count))
        return false;
    if (memcmp(out.data(), again.data(), bytes) != 0)
      fail("reducescatter(cancel)", dt, collSum, count, false, "repeated call differs");
    const int root = n_ - 1;
    for (char* o : {out.data(), again.data()})
      if (!ok("reduce(cancel)", collReduce(in.data(), o, count, dt, collSum, root, comm_, nullptr), dt, collSum, count))
        return false;
    if (r_ == root && memcmp(out.data(), again.data(), bytes) != 0)
      fail("reduce(cancel)", dt, collSum, count, false, "repeated call differs");
    return true;
  }

  bool large(size_t count) {
    ++seed_;
    std::vector<double> in(count), out(count), want(count);
    fillRank(in.data(), 0, count, collFloat64, collSum, seed_, r_);
    if (!ok("allreduce", collAllReduce(in.data(), out.data(), count, collFloat64, collSum, comm_, nullptr), collFloat64,
            collSum, count))
      return false;
    check("allreduce", out.data(), 0, count, collFloat64, collSum, false);
    hashes_.push_back(hashBytes(out.data(), count * sizeof(double)));
    if (!ok("allreduce", collAllReduce(in.data(), in.data(), count, collFloat64, collMax, comm_, nullptr), collFloat64,
            collMax, count))
      return false;
    hashes_.push_back(hashBytes(in.data(), count * sizeof(double)));
    fillRank(in.data(), 0, count, collFloat64, collSum, seed_, r_);
    const int root = 1 % n_;
    if (!ok("reduce", collReduce(in.data(), out.data(), count, collFloat64, collSum, root, comm_, nullptr),
            collFloat64, collSum, count))
      return false;
    if (r_ == root) check("reduce", out.data(), 0, count, collFloat64, collSum, false);
    if (!ok("broadcast", collBroadcast(in.data(), out.data(), count, collFloat64, n_ - 1, comm_, nullptr), collFloat64,
            collSum, count))
      return false;
    fillRank(want.data(), 0, count, collFloat64, collSum, seed_, n_ - 1);
    if (memcmp(out.data(), want.data(), count * sizeof(double)) != 0)
      fail("broadcast", collFloat64, collSum, count, false, "large");
    const size_t per = count / n_ + 1;
    std::vector<double> rsIn(per * n_), ag(per * n_);
    fillRank(rsIn.data(), 0, per * n_, collFloat64, collSum, seed_, r_);
    if (!ok("reducescatter", collReduceScatter(rsIn.data(), out.data(), per, collFloat64, collSum, comm_, nullptr),
            collFloat64, collSum, per))
      return false;
    check("reducescatter", out.data(), r_ * per, per, collFloat64, collSum, false);
    if (!ok("allgather", collAllGather(out.data(), ag.data(), per, collFloat64, comm_, nullptr), collFloat64, collSum,
            per))
      return false;
    check("allgather(rs)", ag.data(), 0, per * n_, collFloat64, collSum, false);
    hashes_.push_back(hashBytes(ag.data(), per * n_ * sizeof(double)));
    return true;
  }

 private:
  void fail(const char* what, collDataType_t dt, collRedOp_t op, size_t count, bool inPlace,
            const std::string& msg) override {
    if (++fails <= 8)
      fprintf(stderr, "rank %d: %s type %d op %d count %zu%s: %s\n", r_, what, dt, op, count, inPlace ? " in-place" : "",
              msg.c_str());
  }
};

void runLayout(const std::vector<std::string>& hosts, const Env& extra, bool full, size_t largeCount,
               const std::vector<Env>& rankEnv = {}) {
  const int n = static_cast<int>(hosts.size());
  Env env = extra;
  env.push_back({"COLL_TIMEOUT", "60"});
  auto res = runProcs(hosts, env, [&](int r, collComm_t comm, std::vector<uint64_t>& same) {
    Checks c(r, n, comm, same);
    const size_t small = static_cast<size_t>(n > 2 ? n - 2 : 1);
    for (collDataType_t dt : kLayoutTypes)
      for (size_t count : {size_t(0), size_t(1), small, size_t(13), size_t(1031)})
        for (collRedOp_t op : kOps) {
          if (!full && op != collSum && op != collMin && op != collAvg) continue;
          if (!c.reductions(dt, count, op)) return c.fails;
        }
    for (collDataType_t dt : {collFloat64, collFloat16, collBfloat16})
      for (size_t count : {size_t(1), size_t(13), size_t(4099)})
        if (!c.orderSensitive(dt, count)) return c.fails;
    if (largeCount && !c.large(largeCount)) return c.fails;
    return c.fails;
  }, rankEnv);
  expectPassedWithSameBits(res, n);
}

using Hosts = std::vector<std::string>;

struct Layout {
  const char* name;
  Hosts hosts;
};
const Layout kLayouts[] = {
    {"ThreePlusOne", {"A", "A", "A", "B"}},
    {"OneOneTwo", {"A", "B", "C", "C"}},
    {"Interleaved", {"A", "B", "A", "B"}},
    {"TwoTwoOneThree", {"A", "A", "B", "B", "C", "D", "D", "D"}},
    {"ShuffledUneven", {"D", "A", "C", "B", "D", "A", "B", "D"}},
    {"OnePerHost", {"A", "B", "C", "D", "E"}},
    {"InterleavedThree", {"A", "B", "C", "A", "B", "C"}},
    {"EvenScrambled", {"B", "A", "C", "A", "C", "B"}},
    {"FourByTwoMirrored", {"A", "B", "C", "D", "D", "C", "B", "A"}},
    {"OneHost", {"A", "A", "A"}},
    {"TwoSingles", {"B", "A"}},
};

struct AlgoSet {
  const char* name;
  Env env;
};
const AlgoSet kAlgos[] = {
    {"ring", {{"COLL_ALGO",
               "allreduce:ring,broadcast:chain,reduce:chain,allgather:ring,reducescatter:ring,alltoall:pairwise,"
               "gather:direct,scatter:direct"},
              {"COLL_CHUNK_BYTES", "4K"}}},
    {"tree", {{"COLL_ALGO", "allreduce:tree,broadcast:tree,reduce:tree,allgather:rd,reducescatter:hd,gather:tree,scatter:tree"},
              {"COLL_CHUNK_BYTES", "1K"}, {"COLL_PIPELINE_DEPTH", "2"}}},
    {"hd", {{"COLL_ALGO", "allreduce:hd"}, {"COLL_CHUNK_BYTES", "1K"}}},
    {"rd", {{"COLL_ALGO", "allreduce:rd"}}},
    {"oneshot", {{"COLL_ALGO", "allreduce:oneshot"}}},
    {"hierrings", {{"COLL_ALGO", "hier"}, {"COLL_HIER_VARIANT", "rings"}, {"COLL_HIER_SEGMENT_BYTES", "4K"},
                   {"COLL_CHUNK_BYTES", "1K"}}},
    {"hierleaders", {{"COLL_ALGO", "hier"}, {"COLL_HIER_VARIANT", "leaders"}}},
    {"hierauto", {{"COLL_ALGO", "hier"}}},
    {"auto", {}},
};

// Sub-communicators that span hosts, with ranks in another order than the parent's.
void runSplit(const std::vector<std::string>& hosts, const Env& extra, int (*color)(int), bool reverse) {
  const int n = static_cast<int>(hosts.size());
  Env env = extra;
  env.push_back({"COLL_TIMEOUT", "60"});
  auto res = runProcs(hosts, env, [&](int r, collComm_t comm, std::vector<uint64_t>& same) {
    collComm_t sub = nullptr;
    if (collCommSplit(comm, color(r), reverse ? n - r : r, &sub) != collSuccess) {
      fprintf(stderr, "rank %d: split failed: %s\n", r, collGetLastError(comm));
      return 1;
    }
    int sr = -1, sn = 0;
    collCommUserRank(sub, &sr);
    collCommCount(sub, &sn);
    Checks c(sr, sn, sub, same);
    [&] {
      for (collDataType_t dt : {collInt8, collFloat16, collFloat64})
        for (size_t count : {size_t(1), size_t(5), size_t(1031)})
          for (collRedOp_t op : kOps)
            if (!c.reductions(dt, count, op)) return;
      for (collDataType_t dt : {collFloat64, collBfloat16})
        for (size_t count : {size_t(13), size_t(4099)})
          if (!c.orderSensitive(dt, count)) return;
      c.large(100003);
    }();
    collCommDestroy(sub);
    if (color(r) != color(0)) same.clear();
    return c.fails;
  });
  ASSERT_EQ(static_cast<int>(res.size()), n);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(res[r].status, 0) << "rank " << r << " found wrong values or failed (see stderr)";
    if (color(r) == color(0)) {
      EXPECT_TRUE(res[r].values == res[0].values) << "rank " << r << " differs from rank 0";
    }
  }
}

TEST(LayoutSplit, AcrossHosts) {
  const std::vector<std::string> hosts = {"A", "A", "B", "B", "C", "C", "C", "D"};
  for (const AlgoSet& a : kAlgos) {
    SCOPED_TRACE(a.name);
    runSplit(hosts, a.env, [](int r) { return r % 2; }, true);
    runSplit(hosts, a.env, [](int r) { return r < 5 ? 0 : 1; }, false);
  }
}

// Ranks pinned so that each host's ring order (by first CPU) is not its rank order, and
// its leader is not its first rank.
TEST(LayoutPinned, LocalOrderDiffersFromRankOrder) {
  const std::vector<std::string> hosts = {"A", "A", "B", "B", "B", "C", "C"};
  const std::vector<Env> pins = {{{"TEST_PIN_CPU", "1"}}, {{"TEST_PIN_CPU", "0"}}, {{"TEST_PIN_CPU", "1"}},
                                 {{"TEST_PIN_CPU", "0"}}, {{"TEST_PIN_CPU", "1"}}, {{"TEST_PIN_CPU", "1"}},
                                 {{"TEST_PIN_CPU", "0"}}};
  for (const AlgoSet& a : kAlgos) {
    SCOPED_TRACE(a.name);
    runLayout(hosts, a.env, false, 100003, pins);
  }
  const std::vector<std::string> even = {"A", "B", "A", "B"};
  const std::vector<Env> pinsEven = {{{"TEST_PIN_CPU", "1"}}, {{"TEST_PIN_CPU", "1"}}, {{"TEST_PIN_CPU", "0"}},
                                     {{"TEST_PIN_CPU", "0"}}};
  for (const AlgoSet& a : kAlgos) {
    SCOPED_TRACE(a.name);
    runLayout(even, a.env, false, 100003, pinsEven);
  }
}

// Nonblocking collectives of every kind in flight at once, a blocking one behind them, and
// a group of collectives: each still matches the reference.
int inFlight(int r, collComm_t comm, std::vector<uint64_t>& same, int n) {
  int fails = 0;
  const size_t count = 1031;
  const uint32_t seed = 9;
  std::vector<double> ar(count), arOut(count), red(count), bc(count), ag(count * n), rs(count * n), rsOut(count),
      blk(count), a2a(count * n), a2aOut(count * n);
  fillRank(ar.data(), 0, count, collFloat64, collSum, seed, r);
  fillRank(red.data(), 0, count, collFloat64, collSum, seed, r);
  fillRank(bc.data(), 0, count, collFloat64, collSum, seed, 1);
  fillRank(blk.data(), 0, count, collFloat64, collSum, seed, r);
  fillRank(rs.data(), 0, count * n, collFloat64, collSum, seed, r);
  for (int p = 0; p < n; ++p) fillRank(a2a.data() + p * count, 0, count, collFloat64, collSum, seed + p, r);
  std::vector<double> arIp = ar, redOut(count);
  collRequest_t req[7] = {};
  int k = 0;
  bool ok = collIallReduce(ar.data(), arOut.data(), count, collFloat64, collSum, comm, &req[k++]) == collSuccess;
  ok &= collIreduce(red.data(), redOut.data(), count, collFloat64, collSum, n - 1, comm, &req[k++]) == collSuccess;
  ok &= collIbroadcast(bc.data(), bc.data(), count, collFloat64, 1, comm, &req[k++]) == collSuccess;
  ok &= collIallGather(blk.data(), ag.data(), count, collFloat64, comm, &req[k++]) == collSuccess;
  ok &= collIreduceScatter(rs.data(), rsOut.data(), count, collFloat64, collSum, comm, &req[k++]) == collSuccess;
  ok &= collIallToAll(a2a.data(), a2aOut.data(), count, collFloat64, comm, &req[k++]) == collSuccess;
  ok &= collAllReduce(arIp.data(), arIp.data(), count, collFloat64, collSum, comm, nullptr) == collSuccess;
  for (int i = 0; i < k; ++i) ok &= collWait(&req[i]) == collSuccess;
  if (!ok) {
    fprintf(stderr, "rank %d: a call failed: %s\n", r, collGetLastError(comm));
    return 1;
  }
  fails += firstWrong(arOut.data(), 0, count, collFloat64, collSum, seed, n) >= 0;
  fails += firstWrong(arIp.data(), 0, count, collFloat64, collSum, seed, n) >= 0;
  if (r == n - 1) fails += firstWrong(redOut.data(), 0, count, collFloat64, collSum, seed, n) >= 0;
  fails += firstWrong(rsOut.data(), r * count, count, collFloat64, collSum, seed, n) >= 0;
  std::vector<double> want(count);
  fillRank(want.data(), 0, count, collFloat64, collSum, seed, 1);
  fails += memcmp(want.data(), bc.data(), count * 8) != 0;
  for (int p = 0; p < n; ++p) {
    fillRank(want.data(), 0, count, collFloat64, collSum, seed, p);
    fails += memcmp(want.data(), ag.data() + p * count, count * 8) != 0;
    fillRank(want.data(), 0, count, collFloat64, collSum, seed + r, p);
    fails += memcmp(want.data(), a2aOut.data() + p * count, count * 8) != 0;
  }
  // A group: the same, deferred and issued together.
  std::fill(arOut.begin(), arOut.end(), 0.0);
  std::fill(rsOut.begin(), rsOut.end(), 0.0);
  ok = collGroupStart() == collSuccess;
  ok &= collAllReduce(ar.data(), arOut.data(), count, collFloat64, collSum, comm, nullptr) == collSuccess;
  ok &= collReduceScatter(rs.data(), rsOut.data(), count, collFloat64, collSum, comm, nullptr) == collSuccess;
  ok &= collAllGather(blk.data(), ag.data(), count, collFloat64, comm, nullptr) == collSuccess;
  ok &= collGroupEnd() == collSuccess;
  if (!ok) {
    fprintf(stderr, "rank %d: group failed: %s\n", r, collGetLastError(comm));
    return fails + 1;
  }
  fails += firstWrong(arOut.data(), 0, count, collFloat64, collSum, seed, n) >= 0;
  fails += firstWrong(rsOut.data(), r * count, count, collFloat64, collSum, seed, n) >= 0;
  same.push_back(hashBytes(arOut.data(), count * 8));
  if (fails) fprintf(stderr, "rank %d: %d wrong results\n", r, fails);
  return fails;
}

TEST(LayoutInFlight, NonblockingAndGroups) {
  for (const auto& hosts : {std::vector<std::string>{"A", "B", "A", "C", "C"},
                            std::vector<std::string>{"B", "A", "C", "A", "C", "B"}})
    for (const AlgoSet& a : kAlgos) {
      SCOPED_TRACE(a.name);
      const int n = static_cast<int>(hosts.size());
      Env env = a.env;
      env.push_back({"COLL_TIMEOUT", "60"});
      auto res = runProcs(hosts, env, [&](int r, collComm_t comm, std::vector<uint64_t>& same) {
        return inFlight(r, comm, same, n);
      });
      ASSERT_EQ(static_cast<int>(res.size()), n);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(res[r].status, 0) << "rank " << r;
        EXPECT_TRUE(res[r].values == res[0].values) << "rank " << r;
      }
    }
}

// Buffers the call does not need may be NULL: count 0 everywhere, the receive buffer of
// a reduce off the root and the send buffer of a broadcast off the root.
int nullBuffers(int r, collComm_t comm, int n) {
  int fails = 0;
  auto call = [&](const char* what, collResult_t rc) {
    if (rc != collSuccess && ++fails) fprintf(stderr, "rank %d: %s: %s\n", r, what, collGetLastError(comm));
    return rc == collSuccess;
  };
  call("allreduce 0", collAllReduce(nullptr, nullptr, 0, collFloat64, collSum, comm, nullptr));
  call("reduce 0", collReduce(nullptr, nullptr, 0, collInt8, collMax, n - 1, comm, nullptr));
  call("broadcast 0", collBroadcast(nullptr, nullptr, 0, collFloat16, 1, comm, nullptr));
  call("allgather 0", collAllGather(nullptr, nullptr, 0, collInt64, comm, nullptr));
  call("reducescatter 0", collReduceScatter(nullptr, nullptr, 0, collBfloat16, collAvg, comm, nullptr));
  call("alltoall 0", collAllToAll(nullptr, nullptr, 0, collUint8, comm, nullptr));
  for (size_t count : {size_t(1), size_t(1031), size_t(100003)}) {
    const uint32_t seed = static_cast<uint32_t>(count);
    std::vector<double> in(count), out(count);
    fillRank(in.data(), 0, count, collFloat64, collSum, seed, r);
    const int root = static_cast<int>(count % n);
    if (!call("reduce", collReduce(in.data(), r == root ? out.data() : nullptr, count, collFloat64, collSum, root,
                                   comm, nullptr)))
      return fails;
    if (r == root && firstWrong(out.data(), 0, count, collFloat64, collSum, seed, n) >= 0 && ++fails)
      fprintf(stderr, "rank %d: reduce count %zu wrong\n", r, count);
    if (!call("broadcast", collBroadcast(r == root ? in.data() : nullptr, out.data(), count, collFloat64, root, comm,
                                         nullptr)))
      return fails;
    std::vector<double> want(count);
    fillRank(want.data(), 0, count, collFloat64, collSum, seed, root);
    if (memcmp(want.data(), out.data(), count * 8) != 0 && ++fails)
      fprintf(stderr, "rank %d: broadcast count %zu wrong\n", r, count);
  }
  return fails;
}

TEST(LayoutNull, UnusedBuffersMayBeNull) {
  const std::vector<std::string> hosts = {"A", "B", "A", "C", "C"};
  for (const AlgoSet& a : kAlgos) {
    SCOPED_TRACE(a.name);
    Env env = a.env;
    env.push_back({"COLL_TIMEOUT", "60"});
    auto res = runProcs(hosts, env, [&](int r, collComm_t comm, std::vector<uint64_t>&) {
      return nullBuffers(r, comm, static_cast<int>(hosts.size()));
    });
    ASSERT_EQ(res.size(), hosts.size());
    for (size_t r = 0; r < hosts.size(); ++r) EXPECT_EQ(res[r].status, 0) << "rank " << r;
  }
}

class Layouts : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Layouts, MatchTheReference) {
  const Layout& l = kLayouts[std::get<0>(GetParam())];
  const AlgoSet& a = kAlgos[std::get<1>(GetParam())];
  runLayout(l.hosts, a.env, false, 100003);
}

INSTANTIATE_TEST_SUITE_P(All, Layouts,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kLayouts))),
                                            ::testing::Range(0, static_cast<int>(std::size(kAlgos)))),
                         [](const auto& info) {
                           return std::string(kLayouts[std::get<0>(info.param)].name) + "_" +
                                  kAlgos[std::get<1>(info.param)].name;
                         });

}  // namespace
