// Bad input gets a clear error code and a message naming the argument; never a crash.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "coll_config.h"
#include "comm/comm.hpp"
#include "comm/config_agree.hpp"
#include "comm/handles.hpp"
#include "base/error.hpp"
#include "harness.hpp"
#if COLL_HAVE_CUDA
#include "cuda/runtime.hpp"
#endif

using namespace testing_coll;

namespace {

bool mentions(const char* text, const char* word) { return std::string(text).find(word) != std::string::npos; }

TEST(Errors, InitArguments) {
  collUniqueId id;
  ASSERT_EQ(collGetUniqueId(&id), collSuccess);
  collComm_t c = reinterpret_cast<collComm_t>(0x1);
  EXPECT_EQ(collCommInitRank(&c, 0, id, 0), collInvalidArgument);
  EXPECT_EQ(c, nullptr);
  EXPECT_TRUE(mentions(collGetLastError(nullptr), "nranks"));
  EXPECT_EQ(collCommInitRank(&c, 2, id, 2), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(nullptr), "rank"));
  EXPECT_EQ(collCommInitRank(&c, 2, id, -1), collInvalidArgument);
  EXPECT_EQ(collCommInitRank(nullptr, 1, id, 0), collInvalidArgument);
  collUniqueId garbage;
  memset(&garbage, 0x42, sizeof(garbage));
  EXPECT_EQ(collCommInitRank(&c, 1, garbage, 0), collInvalidArgument);
  EXPECT_EQ(collGetUniqueId(nullptr), collInvalidArgument);
  EXPECT_EQ(collGetVersion(nullptr), collInvalidArgument);
  int v = 0;
  EXPECT_EQ(collGetVersion(&v), collSuccess);
  EXPECT_EQ(v, COLL_VERSION_CODE);
}

TEST(Errors, InitRankConfig) {
  collUniqueId id;
  ASSERT_EQ(collGetUniqueId(&id), collSuccess);
  collComm_t c = reinterpret_cast<collComm_t>(0x1);
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  EXPECT_EQ(cfg.size, sizeof(collConfig_t));
  EXPECT_EQ(cfg.timeoutSec, COLL_CONFIG_UNDEF_INT);
  collConfig_t bad = cfg;
  bad.magic = 0;
  EXPECT_EQ(collCommInitRankConfig(&c, 1, id, 0, &bad), collInvalidArgument);
  EXPECT_EQ(c, nullptr);
  EXPECT_TRUE(mentions(collGetLastError(nullptr), "COLL_CONFIG_INITIALIZER"));
  bad = cfg;
  bad.size = 4;
  EXPECT_EQ(collCommInitRankConfig(&c, 1, id, 0, &bad), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(nullptr), "size"));
  for (int t : {0, -5, 1000000001}) {
    bad = cfg;
    bad.timeoutSec = t;
    EXPECT_EQ(collCommInitRankConfig(&c, 1, id, 0, &bad), collInvalidArgument) << t;
    EXPECT_TRUE(mentions(collGetLastError(nullptr), "timeoutSec"));
  }
  EXPECT_EQ(collCommInitRankConfig(&c, 2, id, 2, &cfg), collInvalidArgument);
  EXPECT_EQ(collCommInitRankConfig(nullptr, 1, id, 0, &cfg), collInvalidArgument);
  // A valid config: its timeout replaces COLL_TIMEOUT, here and in a split.
  cfg.timeoutSec = 7;
  ASSERT_EQ(collCommInitRankConfig(&c, 1, id, 0, &cfg), collSuccess) << collGetLastError(nullptr);
  EXPECT_EQ(c->impl->timeoutSec(), 7);
  collComm_t child = nullptr;
  ASSERT_EQ(collCommSplit(c, 0, 0, &child), collSuccess) << collGetLastError(c);
  EXPECT_EQ(child->impl->timeoutSec(), 7);
  float x = 2;
  EXPECT_EQ(collAllReduce(&x, &x, 1, collFloat32, collSum, child, nullptr), collSuccess);
  EXPECT_EQ(x, 2);
  EXPECT_EQ(collCommDestroy(child), collSuccess);
  EXPECT_EQ(collCommDestroy(c), collSuccess);
  // NULL config: the defaults, as collCommInitRank.
  ASSERT_EQ(collGetUniqueId(&id), collSuccess);
  ASSERT_EQ(collCommInitRankConfig(&c, 1, id, 0, nullptr), collSuccess) << collGetLastError(nullptr);
  EXPECT_EQ(collCommDestroy(c), collSuccess);
}

// collConfig_t::tunables: each replaces its environment variable for the communicator
// and its splits; a bad entry fails the call with a message naming it.
TEST(Errors, ConfigTunables) {
  // The environment is the subject: a given tunable takes its place.
  ScopedEnv algo("COLL_ALGO", "allreduce:nosuch");  // would fail the communicator
  const char* good[] = {"COLL_ALGO=allreduce:ring", "COLL_CHUNK_BYTES=64K", nullptr};
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  EXPECT_EQ(cfg.tunables, nullptr);
  cfg.tunables = good;
  collUniqueId id;
  ASSERT_EQ(collGetUniqueId(&id), collSuccess);
  collComm_t c = nullptr;
  ASSERT_EQ(collCommInitRankConfig(&c, 1, id, 0, &cfg), collSuccess) << collGetLastError(nullptr);
  EXPECT_EQ(c->impl->config().getStr("COLL_ALGO"), "allreduce:ring");
  EXPECT_EQ(c->impl->config().getSize("COLL_CHUNK_BYTES"), size_t{64} << 10);
  collComm_t child = nullptr;
  ASSERT_EQ(collCommSplit(c, 0, 0, &child), collSuccess) << collGetLastError(c);
  EXPECT_EQ(child->impl->config().getStr("COLL_ALGO"), "allreduce:ring");
  float x = 3;
  EXPECT_EQ(collAllReduce(&x, &x, 1, collFloat32, collSum, child, nullptr), collSuccess);
  EXPECT_EQ(x, 3);
  EXPECT_EQ(collCommDestroy(child), collSuccess);
  EXPECT_EQ(collCommDestroy(c), collSuccess);
  struct Bad {
    const char* entry;
    const char* says;
  };
  for (const Bad& b : {Bad{"COLL_NOSUCH=1", "'COLL_NOSUCH' is not a libcollective tunable"},
                       Bad{"COLL_ALGO", "is not NAME=value"}, Bad{"=ring", "is not NAME=value"},
                       Bad{"COLL_TRANSPORT=pigeon", "COLL_TRANSPORT"}}) {
    const char* list[] = {"COLL_ALGO=allreduce:ring", b.entry, nullptr};
    cfg.tunables = list;
    ASSERT_EQ(collGetUniqueId(&id), collSuccess);
    EXPECT_EQ(collCommInitRankConfig(&c, 1, id, 0, &cfg), collInvalidArgument) << b.entry;
    EXPECT_EQ(c, nullptr);
    EXPECT_TRUE(mentions(collGetLastError(nullptr), b.says)) << b.entry << ": " << collGetLastError(nullptr);
  }
  // A caller built against the first collConfig_t (no tunables field) is not read past
  // its size.
  cfg = COLL_CONFIG_INITIALIZER;
  cfg.size = offsetof(collConfig_t, tunables);
  cfg.tunables = reinterpret_cast<const char* const*>(uintptr_t{1});
  ScopedEnv algoOk("COLL_ALGO", nullptr);  // the bad value above goes: this config gives none
  ASSERT_EQ(collGetUniqueId(&id), collSuccess);
  ASSERT_EQ(collCommInitRankConfig(&c, 1, id, 0, &cfg), collSuccess) << collGetLastError(nullptr);
  EXPECT_EQ(collCommDestroy(c), collSuccess);
}

TEST(Errors, ErrorStrings) {
  for (int r = 0; r <= collNumResults; ++r) EXPECT_NE(collGetErrorString(static_cast<collResult_t>(r)), nullptr);
  EXPECT_STREQ(collGetErrorString(collSuccess), "no error");
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = std::make_unique<Job>(1);
    ASSERT_TRUE(job_->ok());
    c_ = job_->comm(0);
  }
  std::unique_ptr<Job> job_;
  collComm_t c_ = nullptr;
  float a_[64] = {}, b_[64] = {};
};

TEST_F(BadInput, NullBuffersWithCount) {
  EXPECT_EQ(collAllReduce(nullptr, b_, 4, collFloat32, collSum, c_, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "sendbuff"));
  EXPECT_EQ(collAllReduce(a_, nullptr, 4, collFloat32, collSum, c_, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "recvbuff"));
  EXPECT_EQ(collAllGather(nullptr, b_, 4, collFloat32, c_, nullptr), collInvalidArgument);
  EXPECT_EQ(collSend(nullptr, 4, collFloat32, 0, c_, nullptr), collInvalidArgument);
  // A zero count with null buffers is fine.
  EXPECT_EQ(collAllReduce(nullptr, nullptr, 0, collFloat32, collSum, c_, nullptr), collSuccess);
}

// Without a CUDA device (or a CUDA build) a stream can only be a mistake.
TEST_F(BadInput, StreamWithoutCudaDevice) {
#if COLL_HAVE_CUDA
  if (coll::cuda::cudaAvailable()) GTEST_SKIP() << "a CUDA device is present";
#endif
  auto* bogus = reinterpret_cast<collStream_t>(uintptr_t{0x10});
  EXPECT_EQ(collAllReduce(a_, b_, 4, collFloat32, collSum, c_, bogus), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "stream"));
  EXPECT_EQ(collBroadcast(a_, b_, 4, collFloat32, 0, c_, bogus), collInvalidArgument);
  EXPECT_EQ(collGather(a_, b_, 4, collFloat32, 0, c_, bogus), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "stream"));
  EXPECT_EQ(collScatter(a_, b_, 4, collFloat32, 0, c_, bogus), collInvalidArgument);
  // The communicator is still usable.
  EXPECT_EQ(collAllReduce(a_, b_, 4, collFloat32, collSum, c_, nullptr), collSuccess);
}

TEST_F(BadInput, TypesOpsRootsPeers) {
  EXPECT_EQ(collAllReduce(a_, b_, 4, static_cast<collDataType_t>(42), collSum, c_, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "datatype"));
  EXPECT_EQ(collAllReduce(a_, b_, 4, static_cast<collDataType_t>(-1), collSum, c_, nullptr), collInvalidArgument);
  EXPECT_EQ(collAllReduce(a_, b_, 4, collFloat32, static_cast<collRedOp_t>(99), c_, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "op"));
  for (collRedOp_t op : {collBand, collBor, collBxor}) {  // bitwise ops take integers only
    EXPECT_EQ(collAllReduce(a_, b_, 4, collFloat32, op, c_, nullptr), collInvalidArgument);
    EXPECT_TRUE(mentions(collGetLastError(c_), "bitwise"));
    EXPECT_EQ(collReduceScatter(a_, b_, 1, collBfloat16, op, c_, nullptr), collInvalidArgument);
  }
  EXPECT_EQ(collBroadcast(a_, b_, 4, collFloat32, 1, c_, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "root"));
  EXPECT_EQ(collReduce(a_, b_, 4, collFloat32, collSum, -1, c_, nullptr), collInvalidArgument);
  EXPECT_EQ(collSend(a_, 4, collFloat32, 5, c_, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "peer"));
  EXPECT_EQ(collRecv(b_, 4, collFloat32, -3, c_, nullptr), collInvalidArgument);
}

TEST_F(BadInput, CountOverflowAndOverlap) {
  EXPECT_EQ(collAllReduce(a_, b_, SIZE_MAX / 2, collFloat32, collSum, c_, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "overflow"));
  // Byte sizes that fit in size_t but not in the address space (past PTRDIFF_MAX).
  EXPECT_EQ(collAllReduce(a_, a_, SIZE_MAX / sizeof(float), collFloat32, collSum, c_, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "more than any buffer holds")) << collGetLastError(c_);
  EXPECT_EQ(collBroadcast(a_, a_, size_t{PTRDIFF_MAX} + 1, collInt8, 0, c_, nullptr), collInvalidArgument);
  EXPECT_EQ(collAllReduce(a_, a_ + 1, 8, collFloat32, collSum, c_, nullptr), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(c_), "overlap"));
  // The communicator still works after rejected calls.
  a_[0] = 3;
  EXPECT_EQ(collAllReduce(a_, b_, 1, collFloat32, collSum, c_, nullptr), collSuccess);
  EXPECT_EQ(b_[0], 3);
}

// All-gather and reduce-scatter are in place at the rank's own block; sendbuff == recvbuff
// is that on rank 0 only. On rank 1 it overlaps rank 0's block: it used to be taken as in
// place and gave wrong results on both ranks for large counts.
TEST(Errors, GatherScatterInPlaceOnlyAtOwnBlock) {
  Job job(2);
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    std::vector<int32_t> buf(8, r + 1);
    collResult_t rc = collAllGather(buf.data(), buf.data(), 4, collInt32, c, nullptr);
    if (r == 1) {
      EXPECT_EQ(rc, collInvalidArgument);
      EXPECT_TRUE(mentions(collGetLastError(c), "all-gather is in place only when")) << collGetLastError(c);
      // The documented in-place form pairs with rank 0's call.
      if (rc != collSuccess) rc = collAllGather(buf.data() + 4, buf.data(), 4, collInt32, c, nullptr);
    }
    ASSERT_EQ(rc, collSuccess) << collGetLastError(c);
    EXPECT_EQ(buf[0], 1);
    EXPECT_EQ(buf[7], 2);
    std::fill(buf.begin(), buf.end(), r + 1);
    rc = collReduceScatter(buf.data(), buf.data(), 4, collInt32, collSum, c, nullptr);
    if (r == 1) {
      EXPECT_EQ(rc, collInvalidArgument);
      EXPECT_TRUE(mentions(collGetLastError(c), "reduce-scatter is in place only when")) << collGetLastError(c);
      if (rc != collSuccess) rc = collReduceScatter(buf.data(), buf.data() + 4, 4, collInt32, collSum, c, nullptr);
    }
    ASSERT_EQ(rc, collSuccess) << collGetLastError(c);
    EXPECT_EQ(buf[4 * r], 3);
  });
}

// Gather and scatter: the root's range, the NULL rules (the buffer only the root uses may
// be NULL elsewhere), the root's nranks blocks (checked on every rank) and in place only
// at the root's own block. Every refusal names the argument; the communicator then still
// runs a good call.
TEST(Errors, GatherScatterArguments) {
  Job job(2);
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    const bool root = r == 0;
    float in[16] = {}, out[16] = {};
    auto refused = [&](collResult_t rc, const char* word) {
      EXPECT_EQ(rc, collInvalidArgument) << "rank " << r << ", expected a refusal naming " << word;
      EXPECT_TRUE(mentions(collGetLastError(c), word)) << collGetLastError(c);
    };
    refused(collGather(in, out, 4, collFloat32, 2, c, nullptr), "root 2 is out of range [0, 2)");
    refused(collScatter(in, out, 4, collFloat32, -1, c, nullptr), "root -1 is out of range");
    refused(collGather(in, out, 4, static_cast<collDataType_t>(17), 0, c, nullptr), "datatype 17");
    refused(collGather(nullptr, out, 4, collFloat32, 0, c, nullptr), "sendbuff is NULL with count 4");
    refused(collScatter(in, nullptr, 4, collFloat32, 0, c, nullptr), "recvbuff is NULL with count 4");
    if (root) {
      refused(collGather(in, nullptr, 4, collFloat32, 0, c, nullptr), "recvbuff is NULL");
      refused(collScatter(nullptr, out, 4, collFloat32, 0, c, nullptr), "sendbuff is NULL");
      // In place only at the root's own block (block 0 here): one element off overlaps.
      refused(collGather(out + 1, out, 4, collFloat32, 0, c, nullptr), "gather is in place only when");
      refused(collScatter(in, in + 1, 4, collFloat32, 0, c, nullptr), "scatter is in place only when");
    }
    // The root's nranks blocks would be past any buffer: refused on every rank alike.
    refused(collGather(in, out, SIZE_MAX / 8, collFloat32, 0, c, nullptr), "sendcount * nranks");
    refused(collScatter(in, out, SIZE_MAX / 8, collFloat32, 0, c, nullptr), "recvcount * nranks");
    collRequest_t req = nullptr;
    refused(collIgather(in, out, 4, collFloat32, 0, c, nullptr), "request is NULL");
    refused(collIscatter(in, out, 4, collFloat32, 5, c, &req), "root 5");
    EXPECT_EQ(req, nullptr);
    // Good calls, NULL where only the root's buffer would go; rank 0's gather in place.
    for (int i = 0; i < 4; ++i) in[i] = static_cast<float>(10 * r + i);
    if (root) memcpy(out, in, 4 * sizeof(float));
    ASSERT_EQ(collGather(root ? out : in, root ? out : nullptr, 4, collFloat32, 0, c, nullptr), collSuccess)
        << collGetLastError(c);
    for (int i = 0; root && i < 8; ++i) EXPECT_EQ(out[i], static_cast<float>(10 * (i / 4) + i % 4)) << i;
    float mine[4] = {};
    ASSERT_EQ(collIscatter(root ? out : nullptr, mine, 4, collFloat32, 0, c, &req), collSuccess) << collGetLastError(c);
    ASSERT_EQ(collWait(&req), collSuccess) << collGetLastError(c);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(mine[i], static_cast<float>(10 * r + i)) << i;
  });
}

// A count whose byte size fits in size_t but is past PTRDIFF_MAX describes no buffer: it
// is refused on every rank, and the communicator stays usable. The collective used to
// start and copy past the buffers: ranks as threads crashed, ranks as processes failed
// with collRemoteError and an unusable communicator.
TEST(Errors, CountBeyondAnyBufferOnTwoRanks) {
  Job job(2);
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t c) {
    uint16_t buf[64] = {};
    EXPECT_EQ(collAllReduce(buf, buf, SIZE_MAX / 2, collFloat16, collSum, c, nullptr), collInvalidArgument);
    EXPECT_TRUE(mentions(collGetLastError(c), "more than any buffer holds")) << collGetLastError(c);
    int32_t v = r + 1;
    ASSERT_EQ(collAllReduce(&v, &v, 1, collInt32, collSum, c, nullptr), collSuccess) << collGetLastError(c);
    EXPECT_EQ(v, 3);
  });
}

TEST_F(BadInput, StreamWithoutCudaAndSelfSend) {
  int dummy;
  EXPECT_NE(collAllReduce(a_, b_, 4, collFloat32, collSum, c_, &dummy), collSuccess);
  EXPECT_EQ(collSend(a_, 4, collFloat32, 0, c_, nullptr), collInvalidUsage);
  // ...but inside a group, a send to self pairs with a receive from self.
  a_[0] = 5;
  b_[0] = 0;
  EXPECT_EQ(collGroupStart(), collSuccess);
  EXPECT_EQ(collSend(a_, 1, collFloat32, 0, c_, nullptr), collSuccess);
  EXPECT_EQ(collRecv(b_, 1, collFloat32, 0, c_, nullptr), collSuccess);
  EXPECT_EQ(collGroupEnd(), collSuccess) << collGetLastError(nullptr);
  EXPECT_EQ(b_[0], 5);
  EXPECT_EQ(collGroupEnd(), collInvalidUsage);
}

// Unpaired self sends/receives in a group are refused at collGroupEnd before anything
// runs; found halfway through the batch, they used to leave the communicator unusable.
TEST_F(BadInput, UnpairedSelfSendInGroupLeavesCommUsable) {
  EXPECT_EQ(collGroupStart(), collSuccess);
  EXPECT_EQ(collSend(a_, 1, collFloat32, 0, c_, nullptr), collSuccess);
  EXPECT_EQ(collGroupEnd(), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(c_), "must pair up")) << collGetLastError(c_);
  EXPECT_EQ(collGroupStart(), collSuccess);
  EXPECT_EQ(collSend(a_, 1, collFloat32, 0, c_, nullptr), collSuccess);
  EXPECT_EQ(collRecv(b_, 2, collFloat32, 0, c_, nullptr), collSuccess);
  EXPECT_EQ(collGroupEnd(), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(c_), "differ in size")) << collGetLastError(c_);
  collResult_t async = collInternalError;
  EXPECT_EQ(collCommGetAsyncError(c_, &async), collSuccess);
  EXPECT_EQ(async, collSuccess);
  a_[0] = 7;
  EXPECT_EQ(collAllReduce(a_, b_, 1, collFloat32, collSum, c_, nullptr), collSuccess) << collGetLastError(c_);
  EXPECT_EQ(b_[0], 7);
}

TEST(Errors, UseAfterDestroyAndNullHandles) {
  Job job(1);
  ASSERT_TRUE(job.ok());
  collComm_t c = job.comm(0);
  float x = 1, y = 0;
  // A successful call first: the handle check remembers the last live handle per thread,
  // and destroying must end that.
  ASSERT_EQ(collAllReduce(&x, &y, 1, collFloat32, collSum, c, nullptr), collSuccess);
  ASSERT_EQ(collCommDestroy(c), collSuccess);
  job.forget(0);
  EXPECT_EQ(collAllReduce(&x, &y, 1, collFloat32, collSum, c, nullptr), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(c), "not a live communicator"));
  EXPECT_EQ(collCommDestroy(c), collInvalidUsage);
  EXPECT_EQ(collCommAbort(c), collInvalidUsage);
  int n;
  EXPECT_EQ(collCommCount(c, &n), collInvalidUsage);
  EXPECT_EQ(collCommCount(nullptr, &n), collInvalidArgument);
  EXPECT_EQ(collBarrier(nullptr), collInvalidArgument);
  collRequest_t req = nullptr;
  EXPECT_EQ(collWait(&req), collInvalidArgument);
  EXPECT_EQ(collWait(nullptr), collInvalidArgument);
  int done;
  EXPECT_EQ(collTest(&req, &done), collInvalidArgument);
  collRequest_t bogus = reinterpret_cast<collRequest_t>(&x);
  EXPECT_EQ(collWait(&bogus), collInvalidUsage);
}

// Communicators and requests live in one registry: a handle of one kind passed as the
// other (a cast, or a destroyed communicator whose memory now holds a request) used to
// pass the liveness check and be used as the wrong type (garbage, then a crash).
TEST(Errors, HandleOfTheOtherKindIsRefused) {
  Job job(1);
  ASSERT_TRUE(job.ok());
  collComm_t c = job.comm(0);
  float x = 1, y = 0;
  collRequest_t req = nullptr;
  ASSERT_EQ(collIallReduce(&x, &y, 1, collFloat32, collSum, c, &req), collSuccess);
  collRequest_t commAsReq = reinterpret_cast<collRequest_t>(c);
  EXPECT_EQ(collWait(&commAsReq), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(nullptr), "not a live request"));
  int done = 0;
  EXPECT_EQ(collTest(&commAsReq, &done), collInvalidUsage);
  collComm_t reqAsComm = reinterpret_cast<collComm_t>(req);
  int n = -1;
  EXPECT_EQ(collCommCount(reqAsComm, &n), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(nullptr), "not a live communicator"));
  EXPECT_EQ(n, -1);
  EXPECT_EQ(collCommDestroy(reqAsComm), collInvalidUsage);
  EXPECT_TRUE(mentions(collGetLastError(reqAsComm), "not a live communicator"));
  // Both handles still work as what they are.
  EXPECT_EQ(collWait(&req), collSuccess) << collGetLastError(c);
  EXPECT_EQ(y, 1);
  EXPECT_EQ(collCommCount(c, &n), collSuccess);
  EXPECT_EQ(n, 1);
}

// The environment is the subject: values read from it are checked like given ones.
TEST(Errors, BadTunablesAreReported) {
  ScopedEnv algo("COLL_ALGO", "allreduce:nosuch");
  collUniqueId id;
  ASSERT_EQ(collGetUniqueId(&id), collSuccess);
  collComm_t c = nullptr;
  EXPECT_EQ(collCommInitRank(&c, 1, id, 0), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(nullptr), "COLL_ALGO"));
  ScopedEnv transport("COLL_TRANSPORT", "pigeon");
  ScopedEnv algo2("COLL_ALGO", nullptr);
  ASSERT_EQ(collGetUniqueId(&id), collSuccess);
  EXPECT_EQ(collCommInitRank(&c, 1, id, 0), collInvalidArgument);
  EXPECT_TRUE(mentions(collGetLastError(nullptr), "COLL_TRANSPORT"));
}

// The tunables that decide the algorithm must be alike on every rank; other spellings of
// the same value are alike.
TEST(Errors, JobWideTunablesMustAgree) {
  using Values = std::vector<std::pair<const char*, const char*>>;
  auto configWith = [](const Values& values) {
    coll::Config cfg = coll::Config::fromEnv();
    for (const auto& [env, value] : values) cfg.set(env, value);
    return cfg;
  };
  const coll::Config a = configWith({{"COLL_CHUNK_BYTES", "1M"},
                                     {"COLL_ALGO", "allreduce:rd,broadcast:chain"},
                                     {"COLL_TUNER_PLUGIN", "/opt/tuners/libtable.so"},
                                     {"COLL_TUNE_MSG_US", "2"},
                                     {"COLL_PIPELINE_DEPTH", "2"}});
  const coll::Config b = configWith({{"COLL_CHUNK_BYTES", "1048576"},
                                     {"COLL_ALGO", "broadcast:chain,allreduce:rd"},
                                     {"COLL_TUNER_PLUGIN", "libtable.so"},
                                     {"COLL_TUNE_MSG_US", "2.0"},
                                     {"COLL_PIPELINE_DEPTH", "8"}});  // one side's own business
  const coll::Config c = configWith({{"COLL_CHUNK_BYTES", "64K"},
                                     {"COLL_ALGO", "allreduce:rd,broadcast:chain"},
                                     {"COLL_TUNER_PLUGIN", "libtable.so"}});
  auto join = [](std::initializer_list<const coll::Config*> cfgs) {
    std::vector<uint64_t> all;
    for (const coll::Config* cfg : cfgs) {
      std::vector<uint64_t> d = coll::jobWideDigest(*cfg);
      all.insert(all.end(), d.begin(), d.end());
    }
    return all;
  };
  const std::vector<uint64_t> same = join({&a, &b});
  EXPECT_NO_THROW(coll::checkJobWideAgree(a, 0, same));
  EXPECT_NO_THROW(coll::checkJobWideAgree(b, 1, same));

  const std::vector<uint64_t> mixed = join({&a, &b, &c});
  try {
    coll::checkJobWideAgree(c, 2, mixed);
    ADD_FAILURE() << "a different COLL_CHUNK_BYTES passed";
  } catch (const coll::Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_TRUE(mentions(e.what(), "COLL_CHUNK_BYTES differs between the ranks: '64K' on rank 2, another value on "
                                   "ranks 0, 1"))
        << e.what();
  }
  EXPECT_THROW(coll::checkJobWideAgree(a, 0, mixed), coll::Error);
  // A value that does not parse is reported as such, naming the tunable.
  EXPECT_THROW(coll::jobWideDigest(configWith({{"COLL_HIER_SEGMENT_BYTES", "lots"}})), coll::Error);
}

// COLL_TIMEOUT so large that twice it overflows std::chrono's nanoseconds made every wait
// return at once as timed out (collWait failed while the operation went on running).
// collGetUniqueId, whose rendezvous root waits under the same bound, refuses it as well.
TEST(Errors, TimeoutTooLargeIsRefused) {
  for (const char* t : {"9999999999", "99999999999999999999", "0", "-5"}) {
    collUniqueId id;
    ASSERT_EQ(collGetUniqueId(&id), collSuccess);
    // The environment is the subject: collGetUniqueId has no configuration but it.
    ScopedEnv timeout("COLL_TIMEOUT", t);
    collUniqueId refused;
    EXPECT_EQ(collGetUniqueId(&refused), collInvalidArgument) << t;
    EXPECT_TRUE(mentions(collGetLastError(nullptr), "COLL_TIMEOUT must be")) << collGetLastError(nullptr);
    collComm_t c = nullptr;
    EXPECT_EQ(collCommInitRank(&c, 1, id, 0), collInvalidArgument) << t;
    EXPECT_TRUE(mentions(collGetLastError(nullptr), "COLL_TIMEOUT must be")) << collGetLastError(nullptr);
    if (c) collCommDestroy(c);
  }
}

// Pipeline chunk and depth out of range were moved into range without a word (a depth of
// 1000 ran as 64, 16-byte chunks as 64): now they are refused, naming the value.
TEST(Errors, PipelineChunkAndDepthOutOfRangeAreRefused) {
  const std::pair<const char*, const char*> bad[] = {{"COLL_PIPELINE_DEPTH", "0"},
                                                     {"COLL_PIPELINE_DEPTH", "1000"},
                                                     {"COLL_CHUNK_BYTES", "16"},
                                                     {"COLL_CHUNK_BYTES", "2G"}};
  for (const auto& [var, value] : bad) {
    collUniqueId id;
    ASSERT_EQ(collGetUniqueId(&id), collSuccess);
    collComm_t c = nullptr;
    EXPECT_EQ(initRank(&c, 1, id, 0, {{var, value}}), collInvalidArgument) << var << "=" << value;
    EXPECT_TRUE(mentions(collGetLastError(nullptr), var)) << collGetLastError(nullptr);
    EXPECT_TRUE(mentions(collGetLastError(nullptr), value)) << collGetLastError(nullptr);
    if (c) collCommDestroy(c);
  }
  Job job(2, {{"COLL_PIPELINE_DEPTH", "64"}, {"COLL_CHUNK_BYTES", "64"}});
  ASSERT_TRUE(job.ok());
  job.run([&](int r, collComm_t comm) {
    std::vector<int32_t> v(1000, r + 1);
    ASSERT_EQ(collAllReduce(v.data(), v.data(), v.size(), collInt32, collSum, comm, nullptr), collSuccess);
    for (int32_t x : v) ASSERT_EQ(x, 3);
  });
}

}  // namespace
