#include <gtest/gtest.h>

#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "collective.h"
#include "bootstrap/env_internal.hpp"
#include "coll_config.h"
#include "base/error.hpp"
#include "test_util.hpp"

namespace coll {
namespace {

using Hosts = std::vector<std::string>;

TEST(Hostlist, Expands) {
  EXPECT_EQ(expandHostlist("node[01-04,07],gpu5"),
            (Hosts{"node01", "node02", "node03", "node04", "node07", "gpu5"}));
  EXPECT_EQ(expandHostlist("a,b"), (Hosts{"a", "b"}));
  EXPECT_EQ(expandHostlist("single"), (Hosts{"single"}));
  EXPECT_EQ(expandHostlist("x[8-11]"), (Hosts{"x8", "x9", "x10", "x11"}));
  EXPECT_EQ(expandHostlist("x[098-101]"), (Hosts{"x098", "x099", "x100", "x101"}));
  EXPECT_EQ(expandHostlist("r[1-2]n[3-4]"), (Hosts{"r1n3", "r1n4", "r2n3", "r2n4"}));
  EXPECT_EQ(expandHostlist("gpu[5]-ib,cpu[1,3]"), (Hosts{"gpu5-ib", "cpu1", "cpu3"}));
}

TEST(Hostlist, RejectsMalformed) {
  for (const char* bad : {"", "node[1-", "node]", "node[3-1]", "node[a-b]", "a,,b", "x[[1]]", "x[1-2", "x[]"}) {
    try {
      expandHostlist(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), collInvalidArgument) << bad;
    }
  }
}

TEST(Hostlist, BoundsTheExpansion) {
  EXPECT_THROW(expandHostlist("x[0-99999999]"), Error);
  EXPECT_THROW(expandHostlist("a[1-3],b[1-3]", 5), Error);
  EXPECT_EQ(expandHostlist("a[1-3],b[1-2]", 5).size(), 5u);
}

TEST(TasksPerNode, Parses) {
  EXPECT_EQ(tasksOnNode("4", 0), 4);
  EXPECT_EQ(tasksOnNode("2(x3),1", 0), 2);
  EXPECT_EQ(tasksOnNode("2(x3),1", 2), 2);
  EXPECT_EQ(tasksOnNode("2(x3),1", 3), 1);
  EXPECT_THROW(tasksOnNode("2(x3),1", 4), Error);
  EXPECT_THROW(tasksOnNode("2(x3", 0), Error);
  EXPECT_THROW(tasksOnNode("two", 0), Error);
}

TEST(Secret, ParsesHex) {
  std::string hex;
  for (int i = 0; i < 32; ++i) { char b[3]; snprintf(b, 3, "%02X", i * 8); hex += b; }
  uint8_t s[32];
  parseHexSecret(hex, s, "X");
  for (int i = 0; i < 32; ++i) EXPECT_EQ(s[i], static_cast<uint8_t>(i * 8));
  EXPECT_THROW(parseHexSecret(hex.substr(2), s, "X"), Error);
  hex[10] = 'g';
  EXPECT_THROW(parseHexSecret(hex, s, "X"), Error);
}

// Sets variables for one test and removes every launch variable afterwards.
class Env : public ::testing::Test {
 protected:
  static constexpr const char* kAll[] = {
      "COLL_RANK", "COLL_SIZE", "COLL_LOCAL_RANK", "COLL_LOCAL_SIZE", "COLL_ROOT_ADDR", "COLL_JOB_SECRET",
      "COLL_JOB_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
      "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID",
      "SLURM_NODEID", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_STEP_NODELIST",
      "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID"};
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* v : kAll) unsetenv(v);
  }
  static void set(const char* k, const std::string& v) { setenv(k, v.c_str(), 1); }
  static std::string secretHex() { return std::string(32, 'a') + std::string(32, '5'); }
  static collResult_t detectCode(std::string* msg) {
    EnvLaunch e;
    try {
      detectEnvLaunch(&e, 1.0);
      return collSuccess;
    } catch (const Error& err) {
      *msg = err.what();
      return err.code();
    }
  }
};

TEST_F(Env, NothingSet) {
  EnvLaunch e;
  EXPECT_FALSE(detectEnvLaunch(&e, 1.0));
}

// Part of collectiverun's contract without COLL_RANK is refused, naming the variable,
// instead of silently running as a job of one.
TEST_F(Env, PartialCollectiverunIsAnError) {
  for (const char* v : {"COLL_SIZE", "COLL_ROOT_ADDR", "COLL_JOB_SECRET"}) {
    clear();
    set(v, v == std::string("COLL_SIZE") ? "2" : "x");
    std::string msg;
    EXPECT_EQ(detectCode(&msg), collInvalidArgument) << v;
    EXPECT_NE(msg.find(std::string(v) + " is set but COLL_RANK is not"), std::string::npos) << msg;
    collComm_t comm = reinterpret_cast<collComm_t>(0x1);
    EXPECT_EQ(collCommInitFromEnv(&comm), collInvalidArgument) << v;
    EXPECT_EQ(comm, nullptr);
    EXPECT_NE(std::string(collGetLastError(nullptr)).find("COLL_RANK is not"), std::string::npos);
  }
}

// Started without any launcher: a job of one rank, whose collectives work.
TEST_F(Env, NoLauncherRunsAsASingleton) {
  collComm_t comm = nullptr;
  ASSERT_EQ(collCommInitFromEnv(&comm), collSuccess) << collGetLastError(nullptr);
  int n = 0, rank = -1;
  EXPECT_EQ(collCommCount(comm, &n), collSuccess);
  EXPECT_EQ(collCommUserRank(comm, &rank), collSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(rank, 0);
  float x[3] = {1.5f, -2.0f, 7.0f}, y[3] = {0, 0, 0};
  EXPECT_EQ(collAllReduce(x, y, 3, collFloat, collSum, comm, nullptr), collSuccess);
  EXPECT_EQ(std::memcmp(x, y, sizeof x), 0);
  float g[3] = {0, 0, 0};
  EXPECT_EQ(collAllGather(x, g, 3, collFloat, comm, nullptr), collSuccess);
  EXPECT_EQ(std::memcmp(x, g, sizeof x), 0);
  EXPECT_EQ(collBarrier(comm), collSuccess);
  EXPECT_EQ(collCommDestroy(comm), collSuccess);
}

TEST_F(Env, CollectiverunNonZeroRank) {
  int port = test::deadPort();
  set("COLL_RANK", "2");
  set("COLL_SIZE", "4");
  set("COLL_LOCAL_RANK", "0");
  set("COLL_LOCAL_SIZE", "2");
  set("COLL_ROOT_ADDR", "127.0.0.1:" + std::to_string(port));
  set("COLL_JOB_SECRET", secretHex());
  set("COLL_JOB_ID", "job-17");
  EnvLaunch e;
  ASSERT_TRUE(detectEnvLaunch(&e, 1.0));
  EXPECT_EQ(e.source, "collectiverun");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.nranks, 4);
  EXPECT_EQ(e.localRank, 0);
  EXPECT_EQ(e.localSize, 2);
  EXPECT_EQ(addrToString(e.id.root), "127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(e.id.secret[0], 0xaa);
  EXPECT_EQ(e.id.secret[31], 0x55);
  uint64_t nonce = e.id.jobNonce;
  set("COLL_JOB_ID", "job-18");
  ASSERT_TRUE(detectEnvLaunch(&e, 1.0));
  EXPECT_NE(e.id.jobNonce, nonce);
  // Rank 2 must not have started a root: nothing listens on the port.
  EXPECT_THROW(connectWithRetry(e.id.root, Deadline(0.2)), Error);
}

TEST_F(Env, CollectiverunRankZeroServesTheRendezvous) {
  int port = test::deadPort();
  set("COLL_SIZE", "2");
  set("COLL_ROOT_ADDR", "127.0.0.1:" + std::to_string(port));
  set("COLL_JOB_SECRET", secretHex());
  set("COLL_RANK", "1");
  EnvLaunch e1;
  ASSERT_TRUE(detectEnvLaunch(&e1, 3.0));
  set("COLL_RANK", "0");
  EnvLaunch e0;
  ASSERT_TRUE(detectEnvLaunch(&e0, 3.0));
  auto out = test::runRanks(2, [&](int r) {
    auto b = Bootstrap::connect(r == 0 ? e0.id : e1.id, r, 2, 3.0);
    b->barrier();
    b->close();
  });
  for (auto& o : out) EXPECT_EQ(o.code, collSuccess) << o.what;
}

TEST_F(Env, CollectiverunErrorsAreClear) {
  std::string msg;
  set("COLL_RANK", "0");
  set("COLL_SIZE", "2");
  set("COLL_ROOT_ADDR", "127.0.0.1:1");
  EXPECT_EQ(detectCode(&msg), collInvalidArgument);
  EXPECT_NE(msg.find("COLL_JOB_SECRET"), std::string::npos) << msg;
  set("COLL_JOB_SECRET", "abcd");
  EXPECT_EQ(detectCode(&msg), collInvalidArgument);
  EXPECT_NE(msg.find("64 hex"), std::string::npos) << msg;
  set("COLL_JOB_SECRET", secretHex());
  set("COLL_RANK", "2");
  EXPECT_EQ(detectCode(&msg), collInvalidArgument);
  EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
  set("COLL_RANK", "x");
  EXPECT_EQ(detectCode(&msg), collInvalidArgument);
  EXPECT_NE(msg.find("COLL_RANK"), std::string::npos) << msg;
  set("COLL_RANK", "1");
  unsetenv("COLL_ROOT_ADDR");
  EXPECT_EQ(detectCode(&msg), collInvalidArgument);
  EXPECT_NE(msg.find("COLL_ROOT_ADDR"), std::string::npos) << msg;
}

TEST_F(Env, OpenMpiWithRootAddressNeedsNoMpi) {
  set("OMPI_COMM_WORLD_RANK", "3");
  set("OMPI_COMM_WORLD_SIZE", "8");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  set("COLL_ROOT_ADDR", "127.0.0.1:4242");
  set("COLL_JOB_SECRET", secretHex());
  EnvLaunch e;
  ASSERT_TRUE(detectEnvLaunch(&e, 1.0));
  EXPECT_EQ(e.source, "openmpi");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.nranks, 8);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.localSize, 2);
  EXPECT_EQ(addrToString(e.id.root), "127.0.0.1:4242");
}

#if !COLL_HAVE_MPI
TEST_F(Env, OpenMpiWithoutMpiSaysWhatToSet) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "2");
  std::string msg;
  EXPECT_EQ(detectCode(&msg), collInvalidUsage);
  EXPECT_NE(msg.find("COLL_ROOT_ADDR"), std::string::npos) << msg;
  EXPECT_NE(msg.find("COLL_JOB_SECRET"), std::string::npos) << msg;
}
#endif

TEST_F(Env, CollectiverunWinsOverOpenMpiAndSlurm) {
  set("COLL_RANK", "1");
  set("COLL_SIZE", "2");
  set("COLL_ROOT_ADDR", "127.0.0.1:4243");
  set("COLL_JOB_SECRET", secretHex());
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "5");
  set("SLURM_PROCID", "0");
  EnvLaunch e;
  ASSERT_TRUE(detectEnvLaunch(&e, 1.0));
  EXPECT_EQ(e.source, "collectiverun");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.nranks, 2);
}

TEST_F(Env, SlurmDerivesRootFromNodelist) {
  set("SLURM_PROCID", "3");
  set("SLURM_NTASKS", "99");  // the step's count wins
  set("SLURM_STEP_NUM_TASKS", "6");
  set("SLURM_LOCALID", "1");
  set("SLURM_NODEID", "1");
  set("SLURM_STEP_TASKS_PER_NODE", "2(x2),2");
  set("SLURM_STEP_NODELIST", "localhost,node[2-3]");
  set("SLURM_JOB_NODELIST", "other[1-9]");
  set("SLURM_JOB_ID", "12345");
  set("SLURM_STEP_ID", "2");
  EnvLaunch e;
  ASSERT_TRUE(detectEnvLaunch(&e, 1.0));
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.nranks, 6);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.localSize, 2);
  EXPECT_EQ(addrToString(e.id.root), "127.0.0.1:" + std::to_string(slurmRootPort(12345, 2)));
  // The derived secret is a function of the job and step: every task gets the same one.
  EnvLaunch again;
  ASSERT_TRUE(detectEnvLaunch(&again, 1.0));
  EXPECT_EQ(0, memcmp(e.id.secret, again.id.secret, kSecretBytes));
  set("SLURM_STEP_ID", "3");
  EnvLaunch next;
  ASSERT_TRUE(detectEnvLaunch(&next, 1.0));
  EXPECT_NE(0, memcmp(e.id.secret, next.id.secret, kSecretBytes));
  EXPECT_NE(addrPort(e.id.root), addrPort(next.id.root));
  // An explicit secret replaces the derived one.
  set("COLL_JOB_SECRET", secretHex());
  ASSERT_TRUE(detectEnvLaunch(&next, 1.0));
  EXPECT_EQ(next.id.secret[0], 0xaa);
}

TEST_F(Env, SlurmHonoursRootAddress) {
  set("SLURM_PROCID", "1");
  set("SLURM_NTASKS", "2");
  set("SLURM_JOB_NODELIST", "n[1-2]");
  set("SLURM_JOB_ID", "7");
  set("COLL_ROOT_ADDR", "127.0.0.1:4244");
  std::string msg;
  EXPECT_EQ(detectCode(&msg), collInvalidArgument);
  EXPECT_NE(msg.find("COLL_JOB_SECRET"), std::string::npos) << msg;
  set("COLL_JOB_SECRET", secretHex());
  EnvLaunch e;
  ASSERT_TRUE(detectEnvLaunch(&e, 1.0));
  EXPECT_EQ(addrToString(e.id.root), "127.0.0.1:4244");
  EXPECT_EQ(e.nranks, 2);
}

TEST_F(Env, SlurmWithoutNodelistIsAnError) {
  set("SLURM_PROCID", "1");
  set("SLURM_NTASKS", "2");
  set("SLURM_JOB_ID", "7");
  std::string msg;
  EXPECT_EQ(detectCode(&msg), collInvalidArgument);
  EXPECT_NE(msg.find("NODELIST"), std::string::npos) << msg;
}

TEST(SlurmPort, StaysInItsRange) {
  for (uint64_t j : {0ull, 1ull, 99999ull, 4000000000ull})
    for (uint64_t s : {0ull, 1ull, 4294967294ull}) {
      int p = slurmRootPort(j, s);
      EXPECT_GE(p, 12000);
      EXPECT_LT(p, 32000);
    }
  EXPECT_NE(slurmRootPort(100, 0), slurmRootPort(100, 1));
  EXPECT_NE(slurmRootPort(100, 0), slurmRootPort(101, 0));
}

}  // namespace
}  // namespace coll
