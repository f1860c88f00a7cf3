// Every algorithm, forced with COLL_ALGO, against the reference for every data type and
// operation (the data-movement collectives for every data type), in place and out of place
// (alternately), for 2 to 8 ranks (threads, shared memory), with all-reduce results compared bit for bit across ranks. Two variants use
// tiny pipeline chunks, so that even small buffers run the pipelined trees many chunks
// deep and split hd's halving steps into many pieces.
#include <gtest/gtest.h>

#include <iterator>
#include <mutex>
#include <tuple>

#include "../collectives/harness.hpp"
#include "algo_check.hpp"
#include "comm/handles.hpp"
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
    {"ring", "allreduce:ring,broadcast:chain,reduce:chain,allgather:ring,reducescatter:ring,gather:direct,scatter:direct",
     nullptr, nullptr},
    {"rd", "allreduce:rd", nullptr, nullptr},
    {"hd", "allreduce:hd,broadcast:tree,reduce:tree,allgather:rd,reducescatter:hd,gather:tree,scatter:tree", nullptr,
     nullptr},
    // Halving steps in many pipeline chunks for every type and op.
    {"hdchunks", "allreduce:hd", "256", nullptr},
    {"tree", "allreduce:tree,broadcast:tree,reduce:tree,allgather:rd,reducescatter:hd,gather:tree,scatter:tree", "256",
     "2"},
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

// One rank's side of the test: every collective for one (type, count, op) (RankCalls),
// then large float buffers.
class RankChecks : public RankCalls {
 public:
  RankChecks(int r, int n, collComm_t comm, Failures& fails, std::vector<uint64_t>& hashes)
      : RankCalls(r, n, comm, hashes, false), fails_(fails) {}

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
      fail("broadcast", collFloat32, collSum, count, false, "large");
    // Gather and scatter of large blocks, to and from the last rank, out of place.
    return rooted(collFloat32, count, false, n_ - 1);
  }

 private:
  void fail(const char* what, collDataType_t dt, collRedOp_t op, size_t count, bool inPlace,
            const std::string& msg) override {
    fails_.add(label(what, r_, dt, op, count, inPlace) + ": " + msg);
  }

  Failures& fails_;
};

TEST_P(Algorithms, MatchTheReference) {
  const int n = std::get<0>(GetParam());
  const Variant& v = kVariants[std::get<1>(GetParam())];
  Tunables tunables;
  for (const auto& [name, value] : {std::pair{"COLL_ALGO", v.algo}, std::pair{"COLL_CHUNK_BYTES", v.chunk},
                                    std::pair{"COLL_PIPELINE_DEPTH", v.depth}})
    if (value && *value) tunables.emplace_back(name, value);
  Job job(n, tunables);
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
