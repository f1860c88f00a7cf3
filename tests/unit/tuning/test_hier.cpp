// The algorithms across simulated hosts: one process per rank, COLL_HOST_ID per host, so
// the job has real host groups (shared memory inside a host, TCP between hosts). The
// hierarchical all-reduce in both variants, uniform and uneven hosts, hosts interleaved
// in rank order, and the other all-reduce algorithms on the same layouts; every result
// against the reference and bit for bit across ranks.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "algo_check.hpp"
#include "comm/handles.hpp"
#include "proc_job.hpp"
#include "tuning/select.hpp"

using namespace testing_coll;

namespace {

// All-reduce over every type and op at a few counts, then a larger float buffer.
int allReduceChecks(int r, collComm_t comm, std::vector<uint64_t>& report, int n, bool full) {
  int fails = 0;
  uint32_t seed = 7;
  std::vector<size_t> counts = {1, 13, 1031};
  for (collDataType_t dt : kTypes)
    for (size_t count : counts)
      for (collRedOp_t op : kOps) {
        if (!full && op != collSum && op != collAvg) continue;
        const bool inPlace = ++seed % 2 == 0;
        const size_t bytes = count * collTypeSize(dt);
        std::vector<char> in(bytes), out(bytes);
        fillRank(in.data(), 0, count, dt, op, seed, r);
        void* dst = inPlace ? in.data() : out.data();
        if (collAllReduce(in.data(), dst, count, dt, op, comm, nullptr) != collSuccess) {
          fprintf(stderr, "rank %d: allreduce failed: %s\n", r, collGetLastError(comm));
          return fails + 1;
        }
        long bad = firstWrong(dst, 0, count, dt, op, seed, n);
        if (bad >= 0 && ++fails <= 5)
          fprintf(stderr, "rank %d: type %d op %d count %zu: element %ld wrong\n", r, dt, op, count, bad);
        report.push_back(hashBytes(dst, bytes));
      }
  for (size_t count : {size_t(100003)}) {
    std::vector<float> in(count), out(count);
    fillRank(in.data(), 0, count, collFloat32, collSum, ++seed, r);
    if (collAllReduce(in.data(), out.data(), count, collFloat32, collSum, comm, nullptr) != collSuccess) {
      fprintf(stderr, "rank %d: large allreduce failed: %s\n", r, collGetLastError(comm));
      return fails + 1;
    }
    long bad = firstWrong(out.data(), 0, count, collFloat32, collSum, seed, n);
    if (bad >= 0 && ++fails <= 5) fprintf(stderr, "rank %d: count %zu: element %ld wrong\n", r, count, bad);
    report.push_back(hashBytes(out.data(), count * sizeof(float)));
  }
  return fails;
}

// The communicator sees the simulated hosts and runs the expected all-reduce algorithm.
int checkSetup(int r, collComm_t handle, int hosts, const char* expectAlgo) {
  const coll::Comm& comm = *coll::liveComm(handle).impl;
  int fails = 0;
  if (comm.topology().nhosts() != hosts) {
    fprintf(stderr, "rank %d: %d hosts, expected %d\n", r, comm.topology().nhosts(), hosts);
    ++fails;
  }
  coll::OpArgs args;
  args.count = 1031;
  const char* got = coll::Selector(comm.config()).select(comm, args).name();
  if (expectAlgo && strcmp(got, expectAlgo) != 0) {
    fprintf(stderr, "rank %d: all-reduce runs '%s', expected '%s'\n", r, got, expectAlgo);
    ++fails;
  }
  return fails;
}

void runCase(const std::vector<std::string>& hosts, const Env& env, bool full, const char* expectAlgo) {
  const int n = static_cast<int>(hosts.size());
  const int nhosts = static_cast<int>(std::set<std::string>(hosts.begin(), hosts.end()).size());
  Env all = env;
  all.push_back({"COLL_TIMEOUT", "60"});
  auto res = runProcs(hosts, all, [&](int r, collComm_t comm, std::vector<uint64_t>& report) {
    return checkSetup(r, comm, nhosts, expectAlgo) + allReduceChecks(r, comm, report, n, full);
  });
  expectPassedWithSameBits(res, n);
}

using Hosts = std::vector<std::string>;
const Hosts kTwoByTwo = {"A", "A", "B", "B"};
const Hosts kInterleaved = {"A", "B", "A", "B"};
const Hosts kThreeByTwo = {"A", "A", "B", "B", "C", "C"};
const Hosts kTwoByThree = {"A", "B", "A", "B", "A", "B"};
const Hosts kUneven = {"A", "A", "B", "C", "C"};

TEST(Hier, RingsVariantTwoHosts) {
  runCase(kTwoByTwo, {{"COLL_ALGO", "allreduce:hier"}, {"COLL_HIER_VARIANT", "rings"}, {"COLL_HIER_SEGMENT_BYTES", "4K"}},
          true, "hier");
}

TEST(Hier, LeadersVariantTwoHosts) {
  runCase(kTwoByTwo, {{"COLL_ALGO", "allreduce:hier"}, {"COLL_HIER_VARIANT", "leaders"}}, true, "hier");
}

TEST(Hier, BothVariantsThreeHostsAndThreeLocalRanks) {
  for (const Hosts& h : {kThreeByTwo, kTwoByThree})
    for (const char* variant : {"rings", "leaders"})
      runCase(h, {{"COLL_ALGO", "allreduce:hier"}, {"COLL_HIER_VARIANT", variant}, {"COLL_HIER_SEGMENT_BYTES", "64K"},
                  {"COLL_CHUNK_BYTES", "4K"}},
              false, "hier");
}

TEST(Hier, UnevenHostsUseLeaders) {
  // Rings need equal hosts: the algorithm falls back to its leader variant.
  runCase(kUneven, {{"COLL_ALGO", "allreduce:hier"}, {"COLL_HIER_VARIANT", "rings"}}, false, "hier");
}

TEST(Hier, OtherAlgorithmsAcrossHosts) {
  // Interleaved hosts make the ring order differ from the rank order.
  for (const char* algo : {"hd", "tree", "hier", "rd", "oneshot", "ring"})
    runCase(kInterleaved, {{"COLL_ALGO", std::string("allreduce:") + algo}, {"COLL_CHUNK_BYTES", "16K"}}, false, algo);
  runCase(kInterleaved, {}, false, nullptr);  // the automatic choice
  runCase(kUneven, {{"COLL_ALGO", "allreduce:tree"}, {"COLL_CHUNK_BYTES", "1K"}}, false, "tree");
  runCase(kUneven, {{"COLL_ALGO", "allreduce:hd"}}, false, "hd");
}

}  // namespace
