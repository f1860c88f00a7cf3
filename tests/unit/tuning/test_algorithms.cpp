// Every algorithm, forced with COLL_ALGO, against the reference for every data type and
// operation, in place and out of place (alternately), for 2 to 8 ranks (threads, shared
// memory), with all-reduce results compared bit for bit across ranks. Two variants use
// tiny pipeline chunks, so that even small buffers run the pipelined trees many chunks
// deep and split hd's halving steps into many pieces.
#include <gtest/gtest.h>

#include <iterator>
#include <mutex>
#include <tuple>

#include "../collectives/harness.hpp"
#include "algo_check.hpp"
#include "core/handles.hpp"
#include "tuning/select.hpp"

using namespace testing_coll;

namespace {

struct Variant {
  const char* name;
  const char* algo;   // COLL_ALGO
  const char* chunk;  // COLL_CHUNK_BYTES, or null for the default
  const char* depth;  // COLL_PIPELINE_DEPTH
};

const Variant kVariants[] = {
    {"ring", "allreduce:ring,broadcast:chain,reduce:chain,allgather:ring,reducescatter:ring", nullptr, nullptr},
    {"rd", "allreduce:rd", nullptr, nullptr},
    {"hd", "allreduce:hd,broadcast:tree,reduce:tree,allgather:rd,reducescatter:hd", nullptr, nullptr},
    // Halving steps in many pipeline chunks for every type and op.
    {"hdchunks", "allreduce:hd", "256", nullptr},
    {"tree", "allreduce:tree,broadcast:tree,reduce:tree,allgather:rd,reducescatter:hd", "256", "2"},
    // Larger buffers than it takes (the large ones) fall back to the automatic choice.
    {"oneshot", "allreduce:oneshot", nullptr, nullptr},
    {"auto", "", nullptr, nullptr},
};

std::string label(const char* coll, int r, collDataType_t dt, collRedOp_t op, size_t count, bool inPlace) {
  return std::string(coll) + " rank " + std::to_string(r) + " type " + std::to_string(dt) + " op " +
         std::to_string(op) + " count " + std::to_string(count) + (inPlace ? " in-place" : "");
}

class Algorithms : public ::testing::TestWithParam<std::tuple<int, int>> {};

// The selector the communicator would use picks the forced algorithms.
void expectForced(collComm_t handle, const char* algo) {
  const coll::Comm& comm = *coll::liveComm(handle).impl;
  coll::Selector sel(comm.config());
  std::string spec = algo;
  size_t at = 0;
  while (at < spec.size()) {
    size_t end = spec.find(',', at);
    std::string item = spec.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? spec.size() : end + 1;
    coll::OpArgs args;
    std::string kind = item.substr(0, item.find(':'));
    ASSERT_TRUE(coll::parseOpKind(kind, &args.kind)) << kind;
    args.count = 1000;
    EXPECT_STREQ(sel.select(comm, args).name(), item.substr(item.find(':') + 1).c_str()) << item;
  }
}

// One rank's side of the test: every collective for one (type, count, op), then large
// float buffers. Returns false after a failed call (the ranks are then out of step).
class RankChecks {
 public:
  RankChecks(int r, int n, collComm_t comm, Failures& fails, std::vector<uint64_t>& hashes)
      : r_(r), n_(n), comm_(comm), fails_(fails), hashes_(hashes) {}

  bool reductions(collDataType_t dt, size_t count, collRedOp_t op) {
    const bool inPlace = ++seed_ % 2 == 0;
    const size_t bytes = count * collTypeSize(dt);
    std::vector<char> in(bytes * n_ + 1), out(bytes * n_ + 1);
    fillRank(in.data(), 0, count, dt, op, seed_, r_);
    void* dst = inPlace ? in.data() : out.data();
    if (!ok("allreduce", collAllReduce(in.data(), dst, count, dt, op, comm_, nullptr), dt, op, count)) return false;
    check("allreduce", dst, 0, count, dt, op, inPlace);
    hashes_.push_back(hashBytes(dst, bytes));
    const int root = static_cast<int>((seed_ + count) % n_);
    fillRank(in.data(), 0, count, dt, op, seed_, r_);
    if (!ok("reduce", collReduce(in.data(), dst, count, dt, op, root, comm_, nullptr), dt, op, count)) return false;
    if (r_ == root) check("reduce", dst, 0, count, dt, op, inPlace);
    fillRank(in.data(), 0, count * n_, dt, op, seed_, r_);
    void* rsDst = inPlace ? in.data() + r_ * bytes : out.data();
    if (!ok("reducescatter", collReduceScatter(in.data(), rsDst, count, dt, op, comm_, nullptr), dt, op, count))
      return false;
    check("reducescatter", rsDst, r_ * count, count, dt, op, inPlace);
    return op != collSum || movement(dt, count, inPlace, root);
  }

  // All-gather and broadcast, checked exactly.
  bool movement(collDataType_t dt, size_t count, bool inPlace, int root) {
    const size_t bytes = count * collTypeSize(dt);
    std::vector<char> mine(bytes), out(bytes * n_ + 1), bc(bytes + 1);
    fillRank(mine.data(), 0, count, dt, collSum, seed_, r_);
    if (inPlace) memcpy(out.data() + r_ * bytes, mine.data(), bytes);
    const void* src = inPlace ? out.data() + r_ * bytes : mine.data();
    if (!ok("allgather", collAllGather(src, out.data(), count, dt, comm_, nullptr), dt, collSum, count)) return false;
    for (int p = 0; p < n_; ++p) {
      fillRank(mine.data(), 0, count, dt, collSum, seed_, p);
      if (memcmp(mine.data(), out.data() + p * bytes, bytes) != 0)
        fails_.add(label("allgather", r_, dt, collSum, count, inPlace) + ": block of rank " + std::to_string(p));
    }
    fillRank(bc.data(), 0, count, dt, collSum, seed_, root);
    std::vector<char> want(bc.begin(), bc.begin() + bytes);
    if (r_ != root) memset(bc.data(), 0x5a, bytes);
    void* dst = inPlace ? bc.data() : out.data();
    if (!ok("broadcast", collBroadcast(bc.data(), dst, count, dt, root, comm_, nullptr), dt, collSum, count))
      return false;
    if (memcmp(dst, want.data(), bytes) != 0) fails_.add(label("broadcast", r_, dt, collSum, count, inPlace));
    return true;
  }

  // Large buffers: many pipeline chunks, uneven blocks.
  bool large(size_t count) {
    ++seed_;
    std::vector<float> in(count), out(count), want(count);
    fillRank(in.data(), 0, count, collFloat32, collSum, seed_, r_);
    if (!ok("allreduce", collAllReduce(in.data(), out.data(), count, collFloat32, collSum, comm_, nullptr), collFloat32,
            collSum, count))
      return false;
    check("allreduce", out.data(), 0, count, collFloat32, collSum, false);
    hashes_.push_back(hashBytes(out.data(), count * sizeof(float)));
    if (!ok("reduce", collReduce(in.data(), out.data(), count, collFloat32, collSum, n_ - 1, comm_, nullptr),
            collFloat32, collSum, count))
      return false;
    if (r_ == n_ - 1) check("reduce", out.data(), 0, count, collFloat32, collSum, false);
    if (!ok("broadcast", collBroadcast(in.data(), out.data(), count, collFloat32, 1, comm_, nullptr), collFloat32,
            collSum, count))
      return false;
    fillRank(want.data(), 0, count, collFloat32, collSum, seed_, 1);
    if (memcmp(out.data(), want.data(), count * sizeof(float)) != 0)
      fails_.add(label("broadcast", r_, collFloat32, collSum, count, false));
    return true;
  }

 private:
  bool ok(const char* what, collResult_t rc, collDataType_t dt, collRedOp_t op, size_t count) {
    if (rc != collSuccess) fails_.add(label(what, r_, dt, op, count, false) + ": " + collGetLastError(comm_));
    return rc == collSuccess;
  }
  void check(const char* what, const void* got, size_t first, size_t count, collDataType_t dt, collRedOp_t op,
             bool inPlace) {
    long bad = firstWrong(got, first, count, dt, op, seed_, n_);
    if (bad >= 0) fails_.add(label(what, r_, dt, op, count, inPlace) + ": element " + std::to_string(bad));
  }

  int r_, n_;
  collComm_t comm_;
  Failures& fails_;
  std::vector<uint64_t>& hashes_;
  uint32_t seed_ = 100;
};

TEST_P(Algorithms, MatchTheReference) {
  const int n = std::get<0>(GetParam());
  const Variant& v = kVariants[std::get<1>(GetParam())];
  ScopedEnv algo("COLL_ALGO", v.algo), chunk("COLL_CHUNK_BYTES", v.chunk), depth("COLL_PIPELINE_DEPTH", v.depth);
  Job job(n);
  ASSERT_TRUE(job.ok());
  expectForced(job.comm(0), v.algo);
  const size_t counts[] = {1, 7, static_cast<size_t>(13 * n + 5), 1031};
  // Tiny chunks already make thousands of messages out of a few thousand elements.
  const std::vector<size_t> large = v.chunk ? std::vector<size_t>{20011} : std::vector<size_t>{300007, 1 << 20};
  Failures fails;
  std::vector<std::vector<uint64_t>> hashes(n);
  job.run([&](int r, collComm_t comm) {
    RankChecks rc(r, n, comm, fails, hashes[r]);
    for (collDataType_t dt : kTypes)
      for (size_t count : counts)
        for (collRedOp_t op : kOps)
          if (!rc.reductions(dt, count, op)) return;
    for (size_t count : large)
      if (!rc.large(count)) return;
  });
  EXPECT_EQ(fails.count, 0);
  for (int r = 1; r < n; ++r) EXPECT_TRUE(hashes[r] == hashes[0]) << "all-reduce bits of rank " << r << " differ";
}

INSTANTIATE_TEST_SUITE_P(Ranks, Algorithms, ::testing::Combine(::testing::Range(2, 9), ::testing::Range(0, static_cast<int>(std::size(kVariants)))),
                         [](const auto& info) {
                           return std::string(kVariants[std::get<1>(info.param)].name) + "_" +
                                  std::to_string(std::get<0>(info.param));
                         });

}  // namespace
