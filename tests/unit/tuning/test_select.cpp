// The selector with a real communicator: COLL_ALGO forcing and its fallback, and tuner
// plugins (the example table plugin, and the loader's errors for broken ones).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "../collectives/harness.hpp"
#include "proc_job.hpp"
#include "base/config.hpp"
#include "comm/config_agree.hpp"
#include "comm/handles.hpp"
#include "plugins/tuner/coll_tuner.h"
#include "tuning/select.hpp"

using namespace testing_coll;

namespace {

std::string chosen(collComm_t handle, coll::OpKind kind, size_t count) {
  const coll::Comm& comm = *coll::liveComm(handle).impl;
  coll::Selector sel(comm.config());
  coll::OpArgs args;
  args.kind = kind;
  args.count = count;
  args.dtype = collFloat32;
  return sel.select(comm, args).name();
}

TEST(Select, ForcedAlgorithmsAndFallback) {
  {
    // A later item wins: "hd" replaces the all-reduce part of "rd".
    Job job(3, {{"COLL_ALGO", "rd,allreduce:hd,broadcast:tree"}});
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(chosen(job.comm(0), coll::OpKind::AllReduce, 1), "hd");
    EXPECT_EQ(chosen(job.comm(0), coll::OpKind::AllReduce, 1 << 24), "hd");
    EXPECT_EQ(chosen(job.comm(0), coll::OpKind::Broadcast, 1 << 20), "tree");
    EXPECT_EQ(chosen(job.comm(0), coll::OpKind::AllGather, 1 << 20), "rd");
  }
  // One host does not support "hier": the model's choice stands, and the selector says
  // so once per collective (it used to pass over the forcing without a word).
  Job job(3, {{"COLL_ALGO", "allreduce:hier,allgather:hier"}});
  ASSERT_TRUE(job.ok());
  const coll::Comm& comm = *coll::liveComm(job.comm(0)).impl;
  coll::Selector sel(comm.config());
  coll::OpArgs args;
  args.count = 1;
  testing::internal::CaptureStderr();
  for (coll::OpKind k : {coll::OpKind::AllReduce, coll::OpKind::AllReduce, coll::OpKind::AllGather}) {
    args.kind = k;
    EXPECT_NE(std::string(sel.select(comm, args).name()), "hier");
    args.count = 1000;
  }
  const std::string said = testing::internal::GetCapturedStderr();
  const std::string line = "COLL_ALGO forces hier for allreduce, which cannot run a call of 1 elements";
  EXPECT_NE(said.find(line), std::string::npos) << said;
  EXPECT_EQ(said.find("hier for allreduce", said.find(line) + line.size()), std::string::npos) << "said twice: " << said;
  EXPECT_NE(said.find("hier for allgather, which cannot run a call of 1000 elements on this communicator (3 ranks)"),
            std::string::npos) << said;
}

// Calls of one count that differ only in type, reduction or root (a float64 max and a
// uint64 min of one element, as a training loop's metrics) are each priced once. They
// used to share one cache slot, so in turn each priced its shape again, and the store
// filled up until nothing new was cached.
TEST(Select, ShapesOfOneCountArePricedOnce) {
  Job job(2);
  ASSERT_TRUE(job.ok());
  const coll::Comm& comm = *coll::liveComm(job.comm(0)).impl;
  coll::Selector sel(comm.config());
  struct Shape {
    coll::OpKind kind;
    collDataType_t dtype;
    collRedOp_t op;
    int root;
  };
  const Shape shapes[] = {{coll::OpKind::AllReduce, collUint64, collMin, 0},
                          {coll::OpKind::AllReduce, collUint64, collMax, 0},
                          {coll::OpKind::AllReduce, collInt64, collMax, 0},
                          {coll::OpKind::AllReduce, collFloat64, collMax, 0},
                          {coll::OpKind::AllReduce, collFloat64, collSum, 0},
                          {coll::OpKind::Broadcast, collFloat32, collSum, 0},
                          {coll::OpKind::Broadcast, collFloat32, collSum, 1}};
  for (int round = 0; round < 50; ++round)
    for (const Shape& sh : shapes) {
      coll::OpArgs args;
      args.kind = sh.kind;
      args.count = 1;
      args.dtype = sh.dtype;
      args.op = sh.op;
      args.root = sh.root;
      EXPECT_NE(sel.select(comm, args).name(), nullptr);
    }
  EXPECT_EQ(sel.choicesPriced(), std::size(shapes));
}

// The ranks compare COLL_ALGO by what it forces. "rd,allreduce:hd" and "allreduce:hd,rd"
// force different all-reduces (the later item wins), yet passed as alike because the
// comparison sorted the items: one rank ran rd, another hd, and the all-reduce returned
// success with wrong sums.
TEST(Select, AlgoSpellingsAgreeByWhatTheyForce) {
  auto digest = [](const char* algo) {
    coll::Config cfg = coll::Config::fromEnv();
    cfg.set("COLL_ALGO", algo);
    const auto& names = coll::jobWideParams();
    size_t i = 0;
    while (std::string(names[i]) != "COLL_ALGO") ++i;
    return coll::jobWideDigest(cfg)[i];
  };
  auto forcedAllReduce = [](const char* algo) {
    return std::string(coll::parseForcedAlgorithms(algo).at(coll::OpKind::AllReduce)->name());
  };
  ASSERT_EQ(forcedAllReduce("rd,allreduce:hd"), "hd");
  ASSERT_EQ(forcedAllReduce("allreduce:hd,rd"), "rd");
  EXPECT_NE(digest("rd,allreduce:hd"), digest("allreduce:hd,rd"));
  EXPECT_NE(digest("allreduce:rd,allreduce:ring"), digest("allreduce:ring,allreduce:rd"));
  // Other spellings of the same forcing agree.
  EXPECT_EQ(digest("allreduce:rd,broadcast:chain"), digest("broadcast:chain,allreduce:rd"));
  EXPECT_EQ(digest("rd,rd,"), digest("rd"));
  EXPECT_EQ(digest("ring"), digest("reducescatter:ring,allreduce:ring,allgather:ring"));
  EXPECT_NE(digest("ring"), digest(""));
}

TEST(Select, BadForcingIsAnError) {
  // The message names what was wrong and what would have been right.
  const std::pair<const char*, const char*> cases[] = {
#if COLL_HAVE_CUDA
      {"allreduce:nope", "allreduce has no algorithm named 'nope' (it has ring, rd, oneshot, hd, tree, hier, ipc)"},
#else
      {"allreduce:nope", "allreduce has no algorithm named 'nope' (it has ring, rd, oneshot, hd, tree, hier)"},
#endif
      {"nope", "no collective has an algorithm named 'nope' (names: ring, rd, oneshot, hd, tree, hier, chain,"},
      {"everything:ring", "unknown collective 'everything' (allreduce, broadcast,"},
      {"barrier:ring", "barrier has no algorithm named 'ring' (it has none)"}};
  for (const auto& [bad, why] : cases) {
    collComm_t comm = nullptr;
    collUniqueId id;
    ASSERT_EQ(collGetUniqueId(&id), collSuccess);
    EXPECT_EQ(initRank(&comm, 1, id, 0, {{"COLL_ALGO", bad}}), collInvalidArgument) << bad;
    const std::string text = collGetLastError(nullptr);
    EXPECT_NE(text.find(std::string("COLL_ALGO: ") + why), std::string::npos) << text;
  }
}

// Device-buffer calls: the device algorithm of the collective unless COLL_ALGO forces a
// host one (then the host-staged path); host-buffer calls never get a device algorithm.
TEST(Select, DeviceAlgorithmsAreChosenAndForcedLikeTheOthers) {
  auto deviceName = [](const char* algo, coll::OpKind kind) {
    coll::Config cfg = coll::Config::fromEnv();
    cfg.set("COLL_ALGO", algo);
    const coll::Algorithm* a = coll::Selector(cfg).deviceAlgorithm(kind);
    return std::string(a ? a->name() : "staged");
  };
#if COLL_HAVE_CUDA
  for (coll::OpKind k : {coll::OpKind::AllReduce, coll::OpKind::Reduce, coll::OpKind::ReduceScatter,
                         coll::OpKind::AllGather, coll::OpKind::Broadcast}) {
    EXPECT_EQ(deviceName("", k), "ipc") << coll::opKindName(k);
    EXPECT_EQ(deviceName("ipc", k), "ipc") << coll::opKindName(k);
  }
  EXPECT_EQ(deviceName("allreduce:ring", coll::OpKind::AllReduce), "staged");
  EXPECT_EQ(deviceName("allreduce:ring", coll::OpKind::Broadcast), "ipc");
  EXPECT_EQ(deviceName("ring", coll::OpKind::AllGather), "staged");
  EXPECT_EQ(deviceName("ring", coll::OpKind::Broadcast), "ipc");  // broadcast has no ring
  EXPECT_EQ(deviceName("allreduce:ring,allreduce:ipc", coll::OpKind::AllReduce), "ipc");
  // Forced for host buffers, a device algorithm cannot run the call: the model picks.
  Job job(2, {{"COLL_ALGO", "allreduce:ipc"}});
  ASSERT_TRUE(job.ok());
  const coll::Comm& comm = *coll::liveComm(job.comm(0)).impl;
  coll::Selector sel(comm.config());
  coll::OpArgs args;
  args.count = 16;
  testing::internal::CaptureStderr();
  EXPECT_FALSE(sel.select(comm, args).onDevice());
  testing::internal::GetCapturedStderr();
#else
  EXPECT_EQ(deviceName("", coll::OpKind::AllReduce), "staged");
#endif
  EXPECT_EQ(deviceName("", coll::OpKind::AllToAll), "staged");
  EXPECT_EQ(deviceName("", coll::OpKind::Send), "staged");
}

TEST(Select, TablePluginOverridesTheModel) {
  // The plugin's own configuration is its environment (coll_tuner.h gives it no other).
  ScopedEnv table("COLL_TUNER_TABLE", "allreduce:0-1K=tree;allreduce:1K-=rd;broadcast:0-=tree;reduce:0-=nosuch");
  Job job(4, {{"COLL_TUNER_PLUGIN", TUNER_TABLE_SO}});
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(chosen(job.comm(1), coll::OpKind::AllReduce, 8), "tree");    // 32 bytes
  EXPECT_EQ(chosen(job.comm(1), coll::OpKind::AllReduce, 1 << 20), "rd");  // 4 MiB
  EXPECT_EQ(chosen(job.comm(1), coll::OpKind::Broadcast, 1 << 20), "tree");
  // A rule naming an unknown algorithm leaves the model's choice.
  std::string red = chosen(job.comm(1), coll::OpKind::Reduce, 100);
  EXPECT_TRUE(red == "chain" || red == "tree") << red;
  // And the collectives still compute the right thing.
  job.run([&](int r, collComm_t comm) {
    std::vector<float> v(5000, static_cast<float>(r + 1));
    EXPECT_EQ(collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, comm, nullptr), collSuccess);
    EXPECT_EQ(v[4999], 10.0f);
  });
}

TEST(Select, PluginErrorsAreReported) {
  struct Case {
    const char* path;
    const char* fragment;
  } cases[] = {{"/nonexistent/libtuner.so", "cannot be loaded"},
               {TUNER_BAD_VERSION_SO, "interface version 99"},
               {"libc.so.6", "does not export collTunerPlugin_v1"}};
  for (const Case& c : cases) {
    collComm_t comm = nullptr;
    collUniqueId id;
    ASSERT_EQ(collGetUniqueId(&id), collSuccess);
    EXPECT_EQ(initRank(&comm, 1, id, 0, {{"COLL_TUNER_PLUGIN", c.path}}), collInvalidArgument) << c.path;
    std::string msg = collGetLastError(nullptr);
    EXPECT_NE(msg.find(c.fragment), std::string::npos) << msg;
    EXPECT_NE(msg.find("COLL_TUNER_PLUGIN"), std::string::npos) << msg;
  }
  // A plugin whose init fails is skipped with a warning: the model decides.
  Job job(2, {{"COLL_TUNER_PLUGIN", TUNER_BAD_INIT_SO}});
  ASSERT_TRUE(job.ok());
  std::string ar = chosen(job.comm(0), coll::OpKind::AllReduce, 8);
  EXPECT_FALSE(ar.empty());
  job.run([&](int r, collComm_t comm) {
    int v = r + 1;
    EXPECT_EQ(collAllReduce(&v, &v, 1, collInt32, collSum, comm, nullptr), collSuccess);
    EXPECT_EQ(v, 3);
  });
}

// A rank whose tuner plugin cannot be loaded (the file is missing on its host: ranks
// compare the plugin by file name only) failed before it joined the rendezvous, and the
// other ranks waited for it until COLL_TIMEOUT, then blamed slowness. Now it joins, and
// its failure reaches them at once.
TEST(Select, PluginMissingOnOneRankFailsEveryRankAtOnce) {
  const std::string good = TUNER_TABLE_SO;
  const std::string missing = "/nonexistent" + good.substr(good.find_last_of('/'));
  const auto start = std::chrono::steady_clock::now();
  std::vector<ProcResult> res = runProcs(
      {"h", "h", "h"}, {{"COLL_TIMEOUT", "15"}}, [](int, collComm_t, std::vector<uint64_t>&) { return 0; }, {},
      {{{"COLL_TUNER_PLUGIN", good}}, {{"COLL_TUNER_PLUGIN", missing}}, {{"COLL_TUNER_PLUGIN", good}}});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(res.size(), 3u);
  // runProcs: a rank whose communicator could not be made exits with 99.
  for (int r = 0; r < 3; ++r) EXPECT_EQ(res[r].status, 99) << "rank " << r << " should fail to initialise";
  EXPECT_LT(seconds, 10.0) << "the ranks waited for the failed one until COLL_TIMEOUT";
}

// A plugin whose init fails on one rank only (here: that rank's table does not parse).
// That rank went on with the cost model while the others followed the plugin: with ring
// against the model's choice, a 3-rank all-reduce of one element returned success with
// wrong sums on two ranks. Now no rank uses the plugin.
TEST(Select, PluginInitFailingOnOneRankIsDroppedEverywhere) {
  std::vector<ProcResult> res = runProcs(
      {"h", "h", "h"}, {{"COLL_TIMEOUT", "5"}, {"COLL_TUNER_PLUGIN", TUNER_TABLE_SO}},
      [](int r, collComm_t comm, std::vector<uint64_t>&) {
        int fails = 0;
        for (size_t count : {1, 7, 1000}) {
          std::vector<int32_t> v(count, r + 1);
          if (collAllReduce(v.data(), v.data(), count, collInt32, collSum, comm, nullptr) != collSuccess) {
            fprintf(stderr, "rank %d: count %zu: %s\n", r, count, collGetLastError(comm));
            return fails + 1;
          }
          for (size_t i = 0; i < count; ++i) fails += v[i] != 6;
        }
        return fails;
      },
      {{{"COLL_TUNER_TABLE", "allreduce:0-=ring"}},
       {{"COLL_TUNER_TABLE", "allreduce:0-=ring"}},
       {{"COLL_TUNER_TABLE", "allreduce:nonsense"}}});
  ASSERT_EQ(res.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(res[r].status, 0) << "rank " << r;
}

// A plugin that picks differently on different ranks (here: one host's table says tree
// where the others say ring) made ranks run different algorithms for one call: a size
// mismatch, a timeout, or, where the messages happened to fit, wrong sums returned as
// success. Its picks are now compared when the communicator forms: every rank fails
// there, and a job whose ranks agree (the same tables) forms and uses the plugin.
TEST(Select, PluginPickingDifferentlyOnOneRankFailsEveryRank) {
  auto body = [](int r, collComm_t comm, std::vector<uint64_t>&) {
    int32_t v = r + 1;
    if (collAllReduce(&v, &v, 1, collInt32, collSum, comm, nullptr) != collSuccess) return 1;
    return v == 6 ? 0 : 1;
  };
  const Env common = {{"COLL_TIMEOUT", "15"}, {"COLL_TUNER_PLUGIN", TUNER_TABLE_SO}};
  std::vector<ProcResult> res = runProcs({"h", "h", "h"}, common, body,
                                         {{{"COLL_TUNER_TABLE", "allreduce:0-=ring"}},
                                          {{"COLL_TUNER_TABLE", "allreduce:0-=ring"}},
                                          {{"COLL_TUNER_TABLE", "allreduce:0-=tree"}}});
  ASSERT_EQ(res.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(res[r].status, 99) << "rank " << r << " should fail to initialise";
  res = runProcs({"h", "h", "h"}, common, body,
                 {{{"COLL_TUNER_TABLE", "allreduce:0-=tree"}},
                  {{"COLL_TUNER_TABLE", "allreduce:0-=tree"}},
                  {{"COLL_TUNER_TABLE", "allreduce:0-=tree"}}});
  ASSERT_EQ(res.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(res[r].status, 0) << "rank " << r;
}

// The example table plugin's sizes: one that does not fit a size_t wrapped around
// ("17179869184G" is 2^64, read as 0, so a rule for huge calls took every call) and an
// empty range was accepted as a rule that never matches. Both are errors from init.
TEST(Select, TablePluginRefusesSizesThatWrapAndEmptyRanges) {
  void* so = dlopen(TUNER_TABLE_SO, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(so, nullptr) << dlerror();
  const auto* api = static_cast<const collTunerPlugin_v1_t*>(dlsym(so, COLL_TUNER_SYMBOL));
  ASSERT_NE(api, nullptr);
  auto initWith = [&](const char* table) {
    ScopedEnv env("COLL_TUNER_TABLE", table);  // the plugin reads its environment
    collTunerJob_t job{4, 1, 4};
    void* ctx = nullptr;
    int rc = api->init(&job, &ctx);
    if (rc == 0) api->finalize(ctx);
    return rc;
  };
  for (const char* bad : {"allreduce:17179869184G-=tree", "allreduce:0-17179869184G=rd",
                          "allreduce:99999999999999999999-=rd", "allreduce:18446744073709551616-=rd",
                          "allreduce:1M-64K=rd", "allreduce:64K-64K=rd"})
    EXPECT_NE(initWith(bad), 0) << bad;
  for (const char* good : {"allreduce:0-64K=rd", "allreduce:16G-=rd", "allreduce:18446744073709551614-=rd",
                           "allreduce:0-1=rd;broadcast:17179869183G-=tree"})
    EXPECT_EQ(initWith(good), 0) << good;
  dlclose(so);
}

}  // namespace
