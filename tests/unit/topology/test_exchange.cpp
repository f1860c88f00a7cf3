// The job topology built over a real bootstrap (ranks as threads on loopback), and the
// helpers the communicator uses to describe its rank.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "coll_config.h"
#include "topology/exchange.hpp"
#include "../thread_ranks.hpp"
#include "topo_test_util.hpp"

namespace coll {
namespace {

using test::dataFile;
using test::expectError;

UniqueIdData loopbackJob(int nranks) {
  UniqueIdData id;
  randomSecret(id.secret, kSecretBytes);
  sockaddr_storage a{};
  auto& in = reinterpret_cast<sockaddr_in&>(a);
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  id.root = RendezvousRoot::start(a, nranks, id.secret, 30);
  return id;
}

// Every rank builds its JobTopo through exchangeJobTopo; rank r drives gpus[r].
std::vector<JobTopo> runJob(const HostTopo& topo, const std::vector<int>& gpus) {
  int n = static_cast<int>(gpus.size());
  UniqueIdData id = loopbackJob(n);
  std::vector<JobTopo> jobs(n);
  threadranks::run(n, [&](int r) {
    std::unique_ptr<Bootstrap> b = Bootstrap::connect(id, r, n, 30);
    jobs[r] = exchangeJobTopo(*b, topo, LinkTable::defaults(), gpus[r]);
    b->close();
  });
  return jobs;
}

TEST(TopoExchange, HostOnlyRanksAsThreads) {
  HostTopo topo;
  topo.hostname = "n";
  std::vector<JobTopo> jobs = runJob(topo, {-1, -1, -1});
  ASSERT_EQ(jobs[2].nranks(), 3);
  // One process: every rank shares this host's identity.
  EXPECT_EQ(jobs[2].nhosts(), 1);
  EXPECT_EQ(jobs[2].hosts()[0].hostId, localHostId());
  EXPECT_EQ(jobs[2].hosts()[0].ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(jobs[1].placement(2).pid, static_cast<int>(getpid()));
  EXPECT_EQ(jobs[0].placement(1).firstCpu, boundCpus().front());
  for (int r = 1; r < 3; ++r) EXPECT_EQ(describeJob(jobs[r]), describeJob(jobs[0])) << "rank " << r;
}

#if COLL_HAVE_HWLOC
TEST(TopoExchange, GpuRanksAsThreads) {
  HostTopo topo = loadXml(dataFile("gpu8_ib4.xml"));
  std::vector<JobTopo> jobs = runJob(topo, {0, 1, 4, 2});
  ASSERT_EQ(jobs[3].nranks(), 4);
  EXPECT_EQ(jobs[3].pathClass(0, 1), PathClass::NVLink);
  EXPECT_EQ(jobs[3].pathClass(1, 3), PathClass::HostBridge);
  EXPECT_EQ(jobs[3].pathClass(0, 2), PathClass::CrossSocket);
  EXPECT_EQ(ringOrder(jobs[1]), (std::vector<int>{0, 1, 3, 2}));
  EXPECT_EQ(jobs[0].placement(2).nic, 3);  // GPU4 -> mlx5_2
}
#endif

TEST(TopoExchange, LocalRankAndBusIds) {
  std::vector<PeerInfo> peers{{"a", "a", 1}, {"b", "b", 2}, {"a", "a", 3}, {"a", "a", 4}};
  EXPECT_EQ(hostLocalRank(peers, 0), 0);
  EXPECT_EQ(hostLocalRank(peers, 1), 0);
  EXPECT_EQ(hostLocalRank(peers, 3), 2);
  expectError([&] { hostLocalRank(peers, 4); }, collInvalidArgument, {"rank 4", "4"});
  HostTopo t;
  t.gpus.resize(2);
  t.gpus[0].busId = "0000:19:00.0";
  t.gpus[1].busId = "0000:1a:00.0";
  EXPECT_EQ(findGpuByBusId(t, "0000:1a:00.0"), 1);
  EXPECT_EQ(findGpuByBusId(t, "00000000:1A:00.0"), 1);  // NVML's form
  EXPECT_EQ(findGpuByBusId(t, "0000:19:00.0"), 0);
  EXPECT_EQ(findGpuByBusId(t, "0000:1a:00.1"), -1);
  EXPECT_EQ(findGpuByBusId(t, "gpu0"), -1);
  EXPECT_EQ(findGpuByBusId(t, "0000:19:00.0x"), -1);
}

// COLL_RANK_GPU: which of the host's GPUs a rank drives.
TEST(TopoExchange, RankGpu) {
  HostTopo t;
  t.gpus.resize(3);
  t.gpus[0].busId = "0000:19:00.0";
  t.gpus[1].busId = "0000:1a:00.0";
  t.gpus[2].busId = "0000:3b:00.0";
  // auto: the device current in the creating thread, looked up by bus id.
  EXPECT_EQ(rankGpu(t, "auto", 0, "00000000:3B:00.0"), 2);
  EXPECT_EQ(rankGpu(t, "auto", 5, "0000:1a:00.0"), 1);
  EXPECT_EQ(rankGpu(t, "auto", 1, ""), -1) << "no current device: no GPU, not GPU 0";
  EXPECT_EQ(rankGpu(t, "auto", 0, "0000:88:00.0"), -1) << "another machine's topology";
  // local-rank: numbered like the local rank, round the host's GPUs.
  EXPECT_EQ(rankGpu(t, "local-rank", 0, "0000:3b:00.0"), 0);
  EXPECT_EQ(rankGpu(t, "local-rank", 4, ""), 1);
  EXPECT_EQ(rankGpu(HostTopo{}, "local-rank", 4, ""), -1);
  EXPECT_EQ(rankGpu(t, "none", 1, "0000:1a:00.0"), -1);
  for (const char* bad : {"", "Auto", "1", "local"}) {
    const std::string quoted = std::string("COLL_RANK_GPU='") + bad + "'";
    expectError([&] { rankGpu(t, bad, 0, ""); }, collInvalidArgument, {quoted.c_str(), "auto, local-rank or none"});
  }
}

}  // namespace
}  // namespace coll
