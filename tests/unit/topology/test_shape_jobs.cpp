// Jobs on the production-shaped hosts of test_shapes.cpp: the NIC every rank's placement
// names (which the leaders, the ring's cut and the net transport's device all follow:
// the transport takes the placement's nicName, tests/unit/net), leaders, ring order and
// pair costs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coll_config.h"
#include "topology/job.hpp"
#include "topo_test_util.hpp"

namespace coll {
namespace {

using test::dataFile;
using test::place;

#if COLL_HAVE_HWLOC

// Two hosts, one rank on each NUMA node with CPUs (host X: ranks 0.., host Y after them).
JobTopo rankPerNuma(const HostTopo& t) {
  std::vector<int> nodes;
  for (size_t i = 0; i < t.numas.size(); ++i)
    if (!t.numas[i].memoryOnly()) nodes.push_back(static_cast<int>(i));
  std::vector<RankPlacement> ps;
  const int n = static_cast<int>(nodes.size());
  for (int r = 0; r < 2 * n; ++r)
    ps.push_back(place(t, r, r < n ? "X" : "Y", t.numas[nodes[r % n]].cpus, -1, r % n));
  return JobTopo(ps, LinkTable::defaults());
}

// CPU ranks on every NUMA node of two EPYC hosts use the HDR HCA on NUMA node 1, not the
// management port on node 0: leaders sit next to the HCA, each host's ring run starts
// there and ends on the HCA's socket, and the pair cost is the RDMA one.
TEST(TopoShapeJobs, EpycFabricNotManagementPort) {
  HostTopo t = loadXml(dataFile("epyc_ib_mgmt.xml"));
  JobTopo job = rankPerNuma(t);
  ASSERT_EQ(job.nranks(), 8);
  const PathClass toNic[] = {PathClass::Package, PathClass::Numa, PathClass::CrossSocket, PathClass::CrossSocket};
  for (int r = 0; r < 8; ++r) {
    EXPECT_STREQ(job.placement(r).nicName, "mlx5_0") << r;
    EXPECT_EQ(static_cast<NicKind>(job.placement(r).nicKind), NicKind::Ib) << r;
    EXPECT_EQ(static_cast<PathClass>(job.placement(r).nicPath), toNic[r % 4]) << r;
    EXPECT_EQ(job.placement(r).numa, r % 4) << r;
  }
  EXPECT_EQ(job.leaders(), (std::vector<int>{1, 5}));
  EXPECT_EQ(ringOrder(job), (std::vector<int>{1, 2, 3, 0, 5, 6, 7, 4}));
  const RankLink net = job.link(1, 5);
  EXPECT_EQ(net.cls, PathClass::Network);
  EXPECT_DOUBLE_EQ(net.bwGBs, LinkTable::defaults().of(PathClass::Network).bwGBs) << "RDMA, speed unknown";
}

// Omni-Path, Slingshot and EFA hosts, a rank per NUMA node: every rank names the fabric
// NIC and its kind, the leader is the rank on the fabric NIC's node.
TEST(TopoShapeJobs, CpuClustersUseTheirFabric) {
  struct Case {
    const char* file;
    const char* nic;
    NicKind kind;
  };
  for (const Case& c : {Case{"xeon_opa_mgmt.xml", "hfi1_0", NicKind::Opa},
                        Case{"epyc_slingshot_mgmt.xml", "cxi0", NicKind::Slingshot},
                        Case{"xeon_efa.xml", "efa_0", NicKind::Efa}, Case{"xeon_max_flat.xml", "mlx5_0", NicKind::Ib},
                        Case{"knl_flat_opa.xml", "hfi1_0", NicKind::Opa}}) {
    HostTopo t = loadXml(dataFile(c.file));
    JobTopo job = rankPerNuma(t);
    const int perHost = job.nranks() / 2;
    for (int r = 0; r < job.nranks(); ++r) {
      EXPECT_STREQ(job.placement(r).nicName, c.nic) << c.file << " rank " << r;
      EXPECT_EQ(static_cast<NicKind>(job.placement(r).nicKind), c.kind) << c.file << " rank " << r;
    }
    // The fabric NIC is on the last NUMA node with CPUs (the only one on KNL).
    EXPECT_EQ(job.leaders(), (std::vector<int>{perHost - 1, 2 * perHost - 1})) << c.file;
    EXPECT_EQ(static_cast<PathClass>(job.placement(perHost - 1).nicPath), PathClass::Numa) << c.file;
    EXPECT_NE(describeJob(job).find(std::string(c.nic) + " " + nicKindName(c.kind) + " (numa)"), std::string::npos)
        << describeJob(job);
  }
}

// Two POWER9 hosts, a rank per GPU: the GPUs of a socket meet over NVLink at hwloc's 75
// GB/s, and each rank uses its socket's HCA.
TEST(TopoShapeJobs, Power9GpuRanks) {
  HostTopo t = loadXml(dataFile("power9_v100_nvlink.xml"));
  std::vector<RankPlacement> ps;
  for (int r = 0; r < 8; ++r) {
    const int gpu = r % 4;
    ps.push_back(place(t, r, r < 4 ? "A" : "B", t.numas[t.gpus[gpu].loc.numa].cpus, gpu, gpu));
  }
  JobTopo job(ps, LinkTable::defaults());
  EXPECT_EQ(job.pathClass(0, 1), PathClass::NVLink);
  EXPECT_DOUBLE_EQ(job.link(0, 1).bwGBs, 75.0);
  EXPECT_EQ(job.pathClass(2, 3), PathClass::NVLink);
  EXPECT_EQ(job.pathClass(1, 2), PathClass::CrossSocket);
  for (int r = 0; r < 8; ++r) {
    const int socket = (r % 4) / 2;
    EXPECT_STREQ(job.placement(r).nicName, ("mlx5_" + std::to_string(socket)).c_str()) << r;
    EXPECT_EQ(static_cast<PathClass>(job.placement(r).nicPath), PathClass::Numa) << r;
  }
  EXPECT_EQ(job.leaders(), (std::vector<int>{0, 4}));
  EXPECT_EQ(ringOrder(job), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

#endif

}  // namespace
}  // namespace coll
