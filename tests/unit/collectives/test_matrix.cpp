// Every collective x data type x op x in-place/out-of-place x counts, for nranks
// {1,2,3,4,7,8}, against the simple reference in reference.hpp (gather and scatter with
// every root); all-reduce results are also compared bit for bit across ranks.
#include <cmath>
#include <cstring>
#include <mutex>
#include <tuple>

#include "harness.hpp"
#include "reference.hpp"

using namespace testing_coll;

namespace {

std::string label(const char* coll, int n, int r, collDataType_t dt, collRedOp_t op, size_t count, bool inPlace) {
  return std::string(coll) + " n=" + std::to_string(n) + " rank=" + std::to_string(r) + " type=" +
         std::to_string(dt) + " op=" + std::to_string(op) + " count=" + std::to_string(count) +
         (inPlace ? " in-place" : " out-of-place");
}

class Matrix : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

void checkReduced(Failures& f, const std::string& what, const void* got, size_t firstElem, size_t count,
                  collDataType_t dt, collRedOp_t op, uint32_t seed, int n) {
  size_t es = collTypeSize(dt);
  std::vector<char> want((firstElem + count) * es + 8);
  for (size_t i = 0; i < count; ++i) {
    expectedValue(want.data(), firstElem + i, dt, op, seed, n);
    if (!sameValue(static_cast<const char*>(got) - firstElem * es, want.data(), firstElem + i, dt, op)) {
      f.add(what + ": element " + std::to_string(firstElem + i) + " is " +
            std::to_string(loadValue(static_cast<const char*>(got) - firstElem * es, firstElem + i, dt)) +
            ", expected " + std::to_string(loadValue(want.data(), firstElem + i, dt)));
      return;
    }
  }
}

TEST_P(Matrix, AllCollectives) {
  const int n = std::get<1>(GetParam());
  Job job(n, {{"COLL_TRANSPORT", std::get<0>(GetParam())}});
  ASSERT_TRUE(job.ok());
  const size_t counts[] = {0, 1, 7, static_cast<size_t>(13 * n + 5), 1031};
  Failures fails;
  std::vector<std::vector<char>> results(n);  // for cross-rank bit identity
  std::mutex resMu;
  job.run([&](int r, collComm_t comm) {
    uint32_t seed = 1;
    for (collDataType_t dt : kTypes) {
      size_t es = collTypeSize(dt);
      for (size_t count : counts) {
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          for (collRedOp_t op : opsFor(dt)) {
            ++seed;
            // all-reduce
            std::vector<char> in(count * es + 1), out(count * es + 1);
            fillInput(in, 0, count, dt, op, seed, r);
            void* dst = inPlace ? in.data() : out.data();
            if (collAllReduce(in.data(), dst, count, dt, op, comm, nullptr) != collSuccess) {
              fails.add(label("allreduce", n, r, dt, op, count, inPlace) + ": " + collGetLastError(comm));
              return;
            }
            checkReduced(fails, label("allreduce", n, r, dt, op, count, inPlace), dst, 0, count, dt, op, seed, n);
            if (count == 1031 && op == collSum && !inPlace) {
              std::lock_guard<std::mutex> lock(resMu);
              results[r].insert(results[r].end(), static_cast<char*>(dst), static_cast<char*>(dst) + count * es);
            }
            // reduce to a root that moves with the count
            int root = static_cast<int>(count % n);
            fillInput(in, 0, count, dt, op, seed, r);
            dst = inPlace ? in.data() : out.data();
            if (collReduce(in.data(), dst, count, dt, op, root, comm, nullptr) != collSuccess) {
              fails.add(label("reduce", n, r, dt, op, count, inPlace) + ": " + collGetLastError(comm));
              return;
            }
            if (r == root) checkReduced(fails, label("reduce", n, r, dt, op, count, inPlace), dst, 0, count, dt, op, seed, n);
            // reduce-scatter: rank r's block is elements [r*count, (r+1)*count)
            std::vector<char> rsIn(count * n * es + 1), rsOut(count * es + 1);
            fillInput(rsIn, 0, count * n, dt, op, seed, r);
            void* rsDst = inPlace ? rsIn.data() + r * count * es : rsOut.data();
            if (collReduceScatter(rsIn.data(), rsDst, count, dt, op, comm, nullptr) != collSuccess) {
              fails.add(label("reducescatter", n, r, dt, op, count, inPlace) + ": " + collGetLastError(comm));
              return;
            }
            checkReduced(fails, label("reducescatter", n, r, dt, op, count, inPlace), rsDst, r * count, count, dt,
                         op, seed, n);
          }
          // all-gather, broadcast, all-to-all: data movement, checked exactly
          ++seed;
          std::vector<char> ag(count * n * es + 1), mine(count * es + 1);
          fillInput(mine, 0, count, dt, collSum, seed, r);
          const void* agSrc = mine.data();
          if (inPlace) {
            memcpy(ag.data() + r * count * es, mine.data(), count * es);
            agSrc = ag.data() + r * count * es;
          }
          if (collAllGather(agSrc, ag.data(), count, dt, comm, nullptr) != collSuccess) {
            fails.add(label("allgather", n, r, dt, collSum, count, inPlace) + ": " + collGetLastError(comm));
            return;
          }
          for (int p = 0; p < n; ++p) {
            std::vector<char> theirs(count * es + 1);
            fillInput(theirs, 0, count, dt, collSum, seed, p);
            if (memcmp(theirs.data(), ag.data() + p * count * es, count * es) != 0)
              fails.add(label("allgather", n, r, dt, collSum, count, inPlace) + ": block of rank " + std::to_string(p));
          }
          int root = static_cast<int>((count + 1) % n);
          std::vector<char> bc(count * es + 1), bcOut(count * es + 1);
          fillInput(bc, 0, count, dt, collSum, seed, root);
          std::vector<char> bcWant = bc;
          if (r != root) memset(bc.data(), 0x5a, bc.size());
          void* bcDst = inPlace ? bc.data() : bcOut.data();
          if (collBroadcast(bc.data(), bcDst, count, dt, root, comm, nullptr) != collSuccess) {
            fails.add(label("broadcast", n, r, dt, collSum, count, inPlace) + ": " + collGetLastError(comm));
            return;
          }
          if (memcmp(bcDst, bcWant.data(), count * es) != 0)
            fails.add(label("broadcast", n, r, dt, collSum, count, inPlace) + " root " + std::to_string(root));
          // all-to-all: block p of rank r's input goes to rank p's block r
          std::vector<char> a2a(count * n * es + 1), a2aOut(count * n * es + 1);
          fillInput(a2a, 0, count * n, dt, collSum, seed, r);
          void* a2aDst = inPlace ? a2a.data() : a2aOut.data();
          if (collAllToAll(a2a.data(), a2aDst, count, dt, comm, nullptr) != collSuccess) {
            fails.add(label("alltoall", n, r, dt, collSum, count, inPlace) + ": " + collGetLastError(comm));
            return;
          }
          for (int p = 0; p < n; ++p) {
            std::vector<char> theirs(count * n * es + 1);
            fillInput(theirs, 0, count * n, dt, collSum, seed, p);
            if (memcmp(theirs.data() + r * count * es, static_cast<char*>(a2aDst) + p * count * es, count * es) != 0)
              fails.add(label("alltoall", n, r, dt, collSum, count, inPlace) + ": block from rank " + std::to_string(p));
          }
          // gather and scatter to and from every root; the other ranks pass NULL for the
          // buffer only the root uses
          for (int gsRoot = 0; gsRoot < n; ++gsRoot) {
            ++seed;
            const bool isRoot = r == gsRoot;
            std::vector<char> all(count * n * es + 1, 0x5a), blk(count * es + 1, 0x5a);
            fillInput(blk, 0, count, dt, collSum, seed, r);
            const void* gSrc = blk.data();
            if (inPlace && isRoot) {
              memcpy(all.data() + r * count * es, blk.data(), count * es);
              gSrc = all.data() + r * count * es;
            }
            if (collGather(gSrc, isRoot ? all.data() : nullptr, count, dt, gsRoot, comm, nullptr) != collSuccess) {
              fails.add(label("gather", n, r, dt, collSum, count, inPlace) + " root " + std::to_string(gsRoot) + ": " +
                        collGetLastError(comm));
              return;
            }
            for (int p = 0; isRoot && p < n; ++p) {
              std::vector<char> theirs(count * es + 1);
              fillInput(theirs, 0, count, dt, collSum, seed, p);
              if (memcmp(theirs.data(), all.data() + p * count * es, count * es) != 0)
                fails.add(label("gather", n, r, dt, collSum, count, inPlace) + " root " + std::to_string(gsRoot) +
                          ": block of rank " + std::to_string(p));
            }
            // scatter: the root's input holds values of (root, element), block p for rank p
            std::vector<char> want(count * n * es + 1);
            fillInput(want, 0, count * n, dt, collSum, seed, gsRoot);
            if (isRoot) all = want;
            memset(blk.data(), 0x5a, blk.size());
            void* sDst = inPlace && isRoot ? all.data() + r * count * es : blk.data();
            if (collScatter(isRoot ? all.data() : nullptr, sDst, count, dt, gsRoot, comm, nullptr) != collSuccess) {
              fails.add(label("scatter", n, r, dt, collSum, count, inPlace) + " root " + std::to_string(gsRoot) + ": " +
                        collGetLastError(comm));
              return;
            }
            if (memcmp(sDst, want.data() + r * count * es, count * es) != 0)
              fails.add(label("scatter", n, r, dt, collSum, count, inPlace) + " root " + std::to_string(gsRoot));
          }
        }
      }
    }
  });
  EXPECT_EQ(fails.count, 0);
  for (int r = 1; r < n; ++r) EXPECT_TRUE(results[r] == results[0]) << "rank " << r << " differs from rank 0";
}

INSTANTIATE_TEST_SUITE_P(Ranks, Matrix,
                         ::testing::Combine(::testing::Values("tcp", "shm", "auto"),
                                            ::testing::Values(1, 2, 3, 4, 7, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param));
                         });

// Over the net transport, with the in-memory backend that meson.build names in
// COLL_NET_PLUGIN (tests/unit/net/loop_backend.cpp).
INSTANTIATE_TEST_SUITE_P(Net, Matrix, ::testing::Combine(::testing::Values("net"), ::testing::Values(2, 3, 5, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param));
                         });

}  // namespace
