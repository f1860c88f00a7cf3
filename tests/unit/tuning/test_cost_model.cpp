// The cost model on synthetic jobs: how stages share a host's network link, how many
// slow crossings each algorithm makes, and the choices that follow (latency-bound calls
// across hosts cross once; large ones go hierarchical; one host stays flat).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/algorithm.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "topology/job.hpp"
#include "tuning/cost_model.hpp"

namespace coll {
namespace {

const char* const kAllReduce[] = {"ring", "rd", "oneshot", "hd", "tree", "hier"};

// A job whose rank r lives on host hosts[r] (hosts without hardware detail: every
// inter-host pair is plain Ethernet, every intra-host pair the pessimistic class). Rank r
// may run on cpus(r) (default: CPU r % 16 alone), on the kernel with id `kernel`.
JobTopo makeJob(const std::vector<std::string>& hosts, LinkTable table = LinkTable::defaults(),
                const std::function<std::vector<int>(int)>& cpus = nullptr, uint64_t kernel = 0) {
  HostTopo t;
  t.hostname = "n";
  t.pus = 16;
  std::vector<RankPlacement> ps;
  for (size_t r = 0; r < hosts.size(); ++r) {
    PlacementInput in;
    in.rank = static_cast<int>(r);
    in.hostId = hosts[r];
    in.hostname = hosts[r];
    in.pid = 100 + static_cast<int>(r);
    in.cpus = cpus ? cpus(static_cast<int>(r)) : std::vector<int>{static_cast<int>(r % 16)};
    in.kernelId = kernel;
    ps.push_back(makePlacement(t, in));
  }
  return JobTopo(std::move(ps), table);
}

std::string best(const CostModel& m, OpKind kind, size_t bytes, const std::vector<const char*>& algos) {
  std::string b;
  double c = INFINITY;
  for (const char* a : algos) {
    double e = m.estimate(kind, a, bytes);
    if (e < c) {
      c = e;
      b = a;
    }
  }
  return b;
}

std::vector<const char*> allReduceAlgos() { return {std::begin(kAllReduce), std::end(kAllReduce)}; }

TEST(CostModel, FlowsLeavingAHostShareItsLink) {
  JobTopo job = makeJob({"A", "A", "B", "B"});
  const double eth = LinkTable::defaults().ethernet.bwGBs, lat = LinkTable::defaults().ethernet.latUs;
  Hop one = flowsHop(job, {{0, 2}});
  EXPECT_DOUBLE_EQ(one.bwGBs, eth);
  EXPECT_DOUBLE_EQ(one.latUs, lat);
  Hop two = flowsHop(job, {{0, 2}, {1, 3}});
  EXPECT_DOUBLE_EQ(two.bwGBs, eth / 2);
  Hop intra = flowsHop(job, {{0, 1}, {2, 3}});
  EXPECT_GT(intra.bwGBs, eth);
  EXPECT_LT(intra.latUs, lat);
  Hop none = flowsHop(job, {});
  EXPECT_EQ(none.latUs, 0);
}

TEST(CostModel, TinyAllReduceAcrossTwoHostsCrossesOnce) {
  JobTopo job = makeJob({"A", "A", "B", "B"});
  CostModel m(job, CostParams{});
  const double lat = LinkTable::defaults().ethernet.latUs;
  const std::string b = best(m, OpKind::AllReduce, 8, allReduceAlgos());
  const double t = m.estimate(OpKind::AllReduce, b, 8);
  EXPECT_TRUE(b == "rd" || b == "oneshot" || b == "hier") << b;
  EXPECT_LT(t, 2 * lat) << b << ": one crossing each way, in parallel";
  // The ring crosses on every one of its 2(n-1) steps.
  EXPECT_GE(m.estimate(OpKind::AllReduce, "ring", 8), 6 * lat);
  EXPECT_LT(3 * t, m.estimate(OpKind::AllReduce, "ring", 8));
}

TEST(CostModel, LargeAllReduceAcrossHostsIsHierarchical) {
  JobTopo job = makeJob({"A", "A", "B", "B"});
  CostModel m(job, CostParams{});
  const size_t s = 64 << 20;
  EXPECT_EQ(best(m, OpKind::AllReduce, s, allReduceAlgos()), "hier");
  // Each host sends the buffer once instead of the ring's 1.5 times.
  const double wire = s / (LinkTable::defaults().ethernet.bwGBs * 1e3);
  const double hier = m.estimate(OpKind::AllReduce, "hier", s), ring = m.estimate(OpKind::AllReduce, "ring", s);
  EXPECT_GT(hier, wire);
  EXPECT_LT(hier, 1.1 * wire);
  EXPECT_GT(ring / hier, 1.4);
  const CostModel model(job, CostParams{});
  const HierModel& hm = model.hier();
  EXPECT_FALSE(hm.useLeaders(s));
  EXPECT_TRUE(hm.useLeaders(8));
}

TEST(CostModel, OneHostStaysFlat) {
  JobTopo job = makeJob(std::vector<std::string>(8, "A"));
  CostModel m(job, CostParams{});
  EXPECT_EQ(m.estimate(OpKind::AllReduce, "hier", 1024), INFINITY);
  EXPECT_EQ(best(m, OpKind::AllReduce, 8, allReduceAlgos()), "rd");
  std::string large = best(m, OpKind::AllReduce, 256 << 20, allReduceAlgos());
  EXPECT_TRUE(large == "ring" || large == "hd") << large;
  EXPECT_GT(m.estimate(OpKind::AllReduce, "rd", 256 << 20), 2 * m.estimate(OpKind::AllReduce, large, 256 << 20));
}

TEST(CostModel, EstimatesGrowWithSize) {
  for (auto hosts : {std::vector<std::string>{"A", "A", "B", "B"}, std::vector<std::string>{"A", "B", "C"},
                     std::vector<std::string>(7, "A")}) {
    JobTopo job = makeJob(hosts);
    CostModel m(job, CostParams{});
    for (OpKind k : {OpKind::AllReduce, OpKind::Broadcast, OpKind::Reduce, OpKind::AllGather, OpKind::ReduceScatter})
      for (const char* a : {"ring", "rd", "oneshot", "hd", "tree", "hier", "chain"}) {
        double prev = 0;
        for (size_t b = 1; b <= (size_t(1) << 30); b *= 4) {
          double e = m.estimate(k, a, b);
          if (std::isinf(e)) break;
          EXPECT_GE(e, prev) << opKindName(k) << " " << a << " at " << b;
          EXPECT_GT(e, 0);
          prev = e;
        }
      }
  }
}

TEST(CostModel, InterleavedHostsCostTheRingOrderAlgorithmsNothing) {
  JobTopo contiguous = makeJob({"A", "A", "B", "B"}), interleaved = makeJob({"A", "B", "A", "B"});
  CostModel c(contiguous, CostParams{}), i(interleaved, CostParams{});
  const size_t s = 16 << 20;
  auto same = [&](OpKind kind, const char* algo) {
    const double want = c.estimate(kind, algo, s);
    EXPECT_TRUE(std::isfinite(want)) << algo;
    EXPECT_NEAR(i.estimate(kind, algo, s), want, 1e-6 * want) << algo;
  };
  // Rings and chains run in the topology's ring order (0 2 1 3 here), which crosses the
  // network once per host whatever the rank order; so does the hierarchical layout.
  EXPECT_EQ(i.ring().order, (std::vector<int>{0, 2, 1, 3}));
  same(OpKind::AllReduce, "ring");
  same(OpKind::AllReduce, "hier");
  same(OpKind::AllGather, "ring");
  same(OpKind::ReduceScatter, "ring");
  same(OpKind::Broadcast, "chain");
  same(OpKind::Reduce, "chain");
  // Large all-gathers then go round the ring, interleaved or not.
  for (const JobTopo* job : {&contiguous, &interleaved})
    EXPECT_EQ(best(CostModel(*job, CostParams{}), OpKind::AllGather, 4 << 20, {"ring", "rd"}), "ring");
}

TEST(CostModel, AChainPaysItsSlowEdgeOncePerChunk) {
  // Two hosts: one of the chain's three edges crosses the network. A 1 MiB broadcast is
  // two chunks; the first crosses every edge, the second follows one slow edge behind.
  JobTopo job = makeJob({"A", "A", "B", "B"});
  CostParams p;
  const CostModel m(job, p);
  const Hop eth{LinkTable::defaults().ethernet.latUs, LinkTable::defaults().ethernet.bwGBs};
  const double chunk = static_cast<double>(p.chunkBytes), slow = eth.wire(chunk);
  const double t = m.estimate(OpKind::Broadcast, "chain", 2 * p.chunkBytes);
  EXPECT_GT(t, 2 * slow + eth.latUs);
  EXPECT_LT(t, 2.5 * slow);  // plus two fast intra-host hops; each chunk step costing a crossing: 4x
  // Every edge slow (four hosts): each chunk step costs a crossing.
  const double all = CostModel(makeJob({"A", "B", "C", "D"}), p).estimate(OpKind::Broadcast, "chain", 2 * p.chunkBytes);
  EXPECT_GT(all, 4 * slow);
}

TEST(CostModel, ARootedTreeIsPricedAlongItsSlowestPath) {
  // Ring order 0 1 2 3 on hosts A B B B: the 4-rank tree from position 0 is 0 -> 2 -> {1, 3},
  // one crossing and then an intra-host edge on every path, not two crossings.
  const double lat = LinkTable::defaults().ethernet.latUs;
  const CostModel one(makeJob({"A", "B", "B", "B"}), CostParams{});
  EXPECT_GT(one.estimate(OpKind::Broadcast, "tree", 8), lat);
  EXPECT_LT(one.estimate(OpKind::Broadcast, "tree", 8), 1.5 * lat);
  // Hosts A A B B: 0 -> 2 crosses, and so does 2 -> 1; the chain 0 1 2 3 crosses once.
  const CostModel two(makeJob({"A", "A", "B", "B"}), CostParams{});
  EXPECT_GT(two.estimate(OpKind::Broadcast, "tree", 8), 2 * lat);
  EXPECT_LT(two.estimate(OpKind::Broadcast, "chain", 8), 1.5 * lat);
}

TEST(CostModel, UnevenHostsOnlyHaveTheLeaderVariant) {
  JobTopo job = makeJob({"A", "A", "B", "C", "C"});
  const CostModel model(job, CostParams{});
  const HierModel& hm = model.hier();
  EXPECT_TRUE(hm.usable());
  EXPECT_FALSE(hm.uniform());
  EXPECT_EQ(hm.ringsUs(1 << 20), INFINITY);
  EXPECT_TRUE(hm.useLeaders(64 << 20));
  EXPECT_LT(hm.leadersUs(1 << 20), INFINITY);
}

TEST(CostModel, UserLinkFiguresChangeTheEstimate) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_TOPO_LINK_BW", "ethernet=0.125");
  JobTopo slow = makeJob({"A", "A", "B", "B"}, LinkTable::fromConfig(cfg)), fast = makeJob({"A", "A", "B", "B"});
  const size_t s = 64 << 20;
  double ts = CostModel(slow, CostParams{}).estimate(OpKind::AllReduce, "hier", s);
  double tf = CostModel(fast, CostParams{}).estimate(OpKind::AllReduce, "hier", s);
  EXPECT_NEAR(ts / tf, 10.0, 1.0);
  EXPECT_GT(ts, s / (0.125 * 1e3));
}

TEST(CostModel, SegmentsAndParams) {
  CostParams p;
  p.hierSegmentBytes = 4 << 20;
  EXPECT_EQ(hierSegments(1, p), 1);
  EXPECT_EQ(hierSegments(4 << 20, p), 1);
  EXPECT_EQ(hierSegments((4 << 20) + 1, p), 2);
  EXPECT_EQ(hierSegments(size_t(1) << 40, p), 256);
  Config cfg = Config::fromEnv();
  cfg.set("COLL_TUNE_MSG_US", "3.5");
  cfg.set("COLL_HIER_SEGMENT_BYTES", "1M");
  CostParams q = CostParams::fromConfig(cfg, 4096);
  EXPECT_DOUBLE_EQ(q.msgUs, 3.5);
  EXPECT_EQ(q.chunkBytes, 4096u);
  EXPECT_EQ(q.hierSegmentBytes, size_t(1) << 20);
  EXPECT_EQ(q.hierVariant, CostParams::HierVariant::Auto);
}

TEST(CostModel, HierVariantFromConfig) {
  JobTopo job = makeJob({"A", "A", "B", "B"});
  Config cfg = Config::fromEnv();
  // The model's own pick at either end (see LargeAllReduceAcrossHostsIsHierarchical),
  // overridden both ways by COLL_HIER_VARIANT.
  cfg.set("COLL_HIER_VARIANT", "rings");
  CostParams rings = CostParams::fromConfig(cfg, 512 << 10);
  EXPECT_EQ(rings.hierVariant, CostParams::HierVariant::Rings);
  EXPECT_FALSE(CostModel(job, rings).hier().useLeaders(8));
  EXPECT_DOUBLE_EQ(CostModel(job, rings).hier().bestUs(8), CostModel(job, rings).hier().ringsUs(8));
  cfg.set("COLL_HIER_VARIANT", "leaders");
  CostParams leaders = CostParams::fromConfig(cfg, 512 << 10);
  EXPECT_TRUE(CostModel(job, leaders).hier().useLeaders(64 << 20));
  // Uneven hosts have only the leader variant, whatever is asked.
  EXPECT_TRUE(CostModel(makeJob({"A", "A", "B"}), rings).hier().useLeaders(64 << 20));
  cfg.set("COLL_HIER_VARIANT", "ring");
  try {
    CostParams::fromConfig(cfg, 512 << 10);
    ADD_FAILURE() << "COLL_HIER_VARIANT=ring was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("COLL_HIER_VARIANT must be auto, rings or leaders (got 'ring')"),
              std::string::npos)
        << e.what();
  }
}

TEST(CostModel, HierLayoutIsTheJobsGrid) {
  // Hosts interleaved in rank order: the grid follows the hosts, leaders one per host.
  JobTopo job = makeJob({"A", "B", "A", "B"});
  const CostModel model(job, CostParams{});
  const patterns::HierLayout& lay = model.layouts().hier;
  ASSERT_EQ(lay.nhosts(), 2);
  EXPECT_EQ(lay.grid[job.hostOf(0)], (std::vector<int>{0, 2}));
  EXPECT_EQ(lay.grid[job.hostOf(1)], (std::vector<int>{1, 3}));
  EXPECT_EQ(lay.leaders, job.leaders());
  EXPECT_TRUE(lay.uniform);
}

}  // namespace
}  // namespace coll

namespace coll {
namespace {

// Every rank allowed on `cpus` CPUs: the same ones, or (pinnedApart) a range of its own.
JobTopo jobWithCpus(const std::vector<std::string>& hosts, int cpus, bool pinnedApart, uint64_t kernel = 0) {
  auto mask = [=](int r) {
    std::vector<int> m;
    for (int c = 0; c < cpus; ++c) m.push_back((pinnedApart ? r * cpus : 0) + c);
    return m;
  };
  return makeJob(hosts, LinkTable::defaults(), mask, kernel);
}

TEST(CostModel, OversubscriptionFromPlacements) {
  // 2 ranks per host sharing 2 CPUs: not oversubscribed.
  EXPECT_DOUBLE_EQ(oversubscription(jobWithCpus({"A", "A", "B", "B"}, 2, false)), 1.0);
  // 4 ranks sharing 2 CPUs on host A: 2x.
  EXPECT_DOUBLE_EQ(oversubscription(jobWithCpus({"A", "A", "A", "A", "B"}, 2, false)), 2.0);
  // 4 ranks each pinned to its own CPU: the distinct first CPUs count, not the mask size.
  EXPECT_DOUBLE_EQ(oversubscription(jobWithCpus({"A", "A", "A", "A"}, 1, true)), 1.0);
  // Two simulated hosts of 2 ranks on one kernel with 2 CPUs: 2x, as the CPUs are shared.
  EXPECT_DOUBLE_EQ(oversubscription(jobWithCpus({"A", "A", "B", "B"}, 2, false, 42)), 2.0);
}

// Inter-host messages cost kernel CPU time at both ends. Simulated hosts on one 2-CPU
// kernel (the netns benchmark set-up) run every such message on those 2 CPUs: four at
// once (recursive doubling's crossing round) queue one round behind each other, the two
// of the hierarchical leaders do not. Measured side by side (perf/topo/algo_sweep, 8 B to
// 8 KiB): recursive doubling 20-31 us, the hierarchical all-reduce 16-24 us whenever the
// two leaders run on different CPUs. Real hosts with CPUs of their own queue nothing.
TEST(CostModel, MessagesBeyondAKernelsCpusQueue) {
  auto twoCpus = [](int) { return std::vector<int>{0, 1}; };
  JobTopo shared = makeJob({"A", "A", "B", "B"}, LinkTable::defaults(), twoCpus, 42);
  JobTopo apart = makeJob({"A", "A", "B", "B"}, LinkTable::defaults(), twoCpus, 0);
  const double lat = LinkTable::defaults().ethernet.latUs;
  const std::vector<std::pair<int, int>> four{{0, 2}, {2, 0}, {1, 3}, {3, 1}}, two{{0, 2}, {2, 0}};
  EXPECT_DOUBLE_EQ(flowsHop(shared, four, 8).latUs, lat + 8);
  EXPECT_DOUBLE_EQ(flowsHop(shared, two, 8).latUs, lat);
  EXPECT_DOUBLE_EQ(flowsHop(shared, four, 0).latUs, lat);
  EXPECT_DOUBLE_EQ(flowsHop(apart, four, 8).latUs, lat);
  EXPECT_DOUBLE_EQ(flowsHop(shared, {{0, 1}, {1, 0}, {2, 3}, {3, 2}, {0, 1}}, 8).latUs,
                   flowsHop(shared, {{0, 1}}, 0).latUs);  // intra-host messages do not count

  Config cfg = Config::fromEnv();
  CostParams ps = CostParams::forJob(cfg, 512 << 10, shared), pa = CostParams::forJob(cfg, 512 << 10, apart);
  EXPECT_DOUBLE_EQ(ps.netMsgUs, 8);
  CostModel ms(shared, ps), ma(apart, pa);
  for (size_t s : {size_t{8}, size_t{1} << 10, size_t{8} << 10})
    EXPECT_EQ(best(ms, OpKind::AllReduce, s, allReduceAlgos()), "hier") << s;
  for (size_t s : {size_t{8}, size_t{1} << 10}) EXPECT_EQ(best(ma, OpKind::AllReduce, s, allReduceAlgos()), "rd") << s;
}

// Kernel-bypass messages (the InfiniBand backend) take no kernel CPU time, so they do not
// queue behind each other where many cross at once; messages of a pair that goes through
// TCP on either end still do.
TEST(CostModel, KernelBypassMessagesDoNotQueue) {
  auto twoCpus = [](int) { return std::vector<int>{0, 1}; };
  JobTopo job = makeJob({"A", "A", "B", "B"}, LinkTable::defaults(), twoCpus, 42);
  const double eth = LinkTable::defaults().ethernet.latUs, rdma = LinkTable::defaults().of(PathClass::Network).latUs;
  const std::vector<std::pair<int, int>> four{{0, 2}, {2, 0}, {1, 3}, {3, 1}};
  EXPECT_DOUBLE_EQ(flowsHop(job, four, 8).latUs, eth + 8);  // unknown: through the kernel
  job.setNetPaths({NetPath::Kernel, NetPath::Kernel, NetPath::Kernel, NetPath::Kernel});
  EXPECT_DOUBLE_EQ(flowsHop(job, four, 8).latUs, eth + 8);
  job.setNetPaths({NetPath::Bypass, NetPath::Bypass, NetPath::Bypass, NetPath::Bypass});
  EXPECT_TRUE(job.kernelBypass(0, 2));
  EXPECT_FALSE(job.kernelBypass(0, 1));  // the same host: no network at all
  EXPECT_DOUBLE_EQ(flowsHop(job, four, 8).latUs, rdma);
  // Ranks 1 and 3 through TCP: their two messages alone fit the two CPUs, and their
  // pair is the slow one of the stage.
  job.setNetPaths({NetPath::Bypass, NetPath::Kernel, NetPath::Bypass, NetPath::Kernel});
  EXPECT_FALSE(job.kernelBypass(1, 3));
  EXPECT_FALSE(job.kernelBypass(0, 3));
  EXPECT_DOUBLE_EQ(flowsHop(job, four, 8).latUs, eth);
  EXPECT_DOUBLE_EQ(flowsHop(job, {{0, 2}, {2, 0}}, 8).latUs, rdma);
  try {
    job.setNetPaths({NetPath::Bypass});
    ADD_FAILURE() << "a path list of the wrong length was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("1 network paths for 4 ranks"), std::string::npos) << e.what();
  }
}

// Across a distant link (1 ms, as the round trip to the root measures it) the
// hierarchical leaders' exchange outlasts the other ranks' spin: they sleep, and waking
// them costs what recursive doubling, where every rank waits for a message of its own,
// does not pay.
TEST(CostModel, RanksThatSleepThroughTheLeadersExchangeCostAWake) {
  auto twoCpus = [](int) { return std::vector<int>{0, 1}; };
  Config cfg = Config::fromEnv();
  cfg.set("COLL_TOPO_LINK_LAT", "ethernet=1000");
  JobTopo near = makeJob({"A", "A", "B", "B"}, LinkTable::defaults(), twoCpus, 42);
  JobTopo far = makeJob({"A", "A", "B", "B"}, LinkTable::fromConfig(cfg), twoCpus, 42);
  CostParams p = CostParams::forJob(cfg, 512 << 10, far), quiet = p;
  quiet.wakeUs = 0;
  EXPECT_DOUBLE_EQ(p.wakeUs, 50);
  EXPECT_NEAR(CostModel(far, p).hier().leadersUs(8) - CostModel(far, quiet).hier().leadersUs(8), 50, 1e-6);
  EXPECT_DOUBLE_EQ(CostModel(near, p).hier().leadersUs(8), CostModel(near, quiet).hier().leadersUs(8));
  EXPECT_EQ(best(CostModel(far, p), OpKind::AllReduce, 8, allReduceAlgos()), "rd");
  EXPECT_EQ(best(CostModel(near, p), OpKind::AllReduce, 8, allReduceAlgos()), "hier");
  EXPECT_EQ(best(CostModel(far, quiet), OpKind::AllReduce, 8, allReduceAlgos()), "hier");
}

TEST(CostModel, OversubscribedJobsPreferFewerRounds) {
  JobTopo calm = jobWithCpus({"A", "A", "B", "B"}, 2, false);
  JobTopo busy = jobWithCpus({"A", "A", "A", "A", "B", "B", "B", "B"}, 2, false);
  Config cfg = Config::fromEnv();
  cfg.set("COLL_TUNE_NET_MSG_US", "0");  // the oversubscription charges alone
  CostParams pc = CostParams::forJob(cfg, 512 << 10, calm), pb = CostParams::forJob(cfg, 512 << 10, busy);
  EXPECT_DOUBLE_EQ(pc.msgUs, CostParams::fromConfig(cfg, 512 << 10).msgUs);
  EXPECT_DOUBLE_EQ(pb.msgUs, pc.msgUs + cfg.getDouble("COLL_TUNE_OVERSUB_US"));  // 2 ranks per CPU
  EXPECT_DOUBLE_EQ(pb.reduceGBs, pc.reduceGBs / 2);
  // Over the same hosts every message costs more when oversubscribed, so the ring's 14
  // steps gain more time than recursive doubling's 3 rounds (8 B: no reduction to speak of).
  CostModel mb(busy, pb), mc(busy, CostParams::fromConfig(cfg, 512 << 10));
  auto gain = [&](const char* a) { return mb.estimate(OpKind::AllReduce, a, 8) - mc.estimate(OpKind::AllReduce, a, 8); };
  const double perMsg = cfg.getDouble("COLL_TUNE_OVERSUB_US");
  EXPECT_NEAR(gain("ring"), 14 * perMsg, 0.01);
  EXPECT_NEAR(gain("rd"), 3 * perMsg, 0.01);
}

// 8 ranks on 2 CPUs of one host (measured side by side with perf/topo/algo_sweep):
// recursive doubling is best up to a few KiB, halving-doubling 1.4-2.1x faster from
// 32 KiB to 512 KiB, as every rank reduces with a quarter of a core.
TEST(CostModel, EightRanksOnTwoCpusSwitchToHalvingDoubling) {
  JobTopo busy = jobWithCpus({"A", "A", "A", "A", "A", "A", "A", "A"}, 2, false);
  Config cfg = Config::fromEnv();
  CostModel m(busy, CostParams::forJob(cfg, 512 << 10, busy));
  auto est = [&](const char* a, size_t s) { return m.estimate(OpKind::AllReduce, a, s); };
  for (size_t s : {size_t{8}, size_t{1} << 10, size_t{4} << 10}) EXPECT_LT(est("rd", s), est("hd", s)) << s;
  for (size_t s : {size_t{32} << 10, size_t{128} << 10, size_t{512} << 10}) EXPECT_LT(est("hd", s), est("rd", s)) << s;
}

// Ranks that share CPUs wait for each other to be scheduled once per round. The one-shot
// all-reduce has one round where recursive doubling has log2(n): on one host, measured
// side by side (perf/topo/algo_sweep, 8 B to 256 B) 3.4-3.8 us against 4.6-4.9 with 4 ranks
// on 2 CPUs, 11.4-12.6 against 14.4-15.9 with 8. It sends and folds n-1 buffers, so it
// loses once they are a few KiB. Across simulated hosts of one kernel, its inter-host
// messages (every pair crosses) queue on the shared CPUs: recursive doubling stays.
TEST(CostModel, SharedCpusTakeTinyBuffersInOneShot) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_TUNE_OVERSUB_US", "3");
  for (int n : {3, 4, 8}) {
    JobTopo busy = jobWithCpus(std::vector<std::string>(n, "A"), 2, false);
    CostParams p = CostParams::forJob(cfg, 512 << 10, busy);
    EXPECT_DOUBLE_EQ(p.oversubUs, 3 * (n / 2.0 - 1)) << n;
    CostModel m(busy, p);
    for (size_t s : {size_t{8}, size_t{256}}) EXPECT_EQ(best(m, OpKind::AllReduce, s, allReduceAlgos()), "oneshot") << n << " " << s;
    EXPECT_NE(best(m, OpKind::AllReduce, 16 << 10, allReduceAlgos()), "oneshot") << n;
    EXPECT_EQ(m.estimate(OpKind::AllReduce, "oneshot", kOneShotMaxTotalBytes / n + 1), INFINITY) << n;
    // One wait for the peers, then the software part of each further message.
    const double lat = flowsHop(busy, {{0, 1}}).latUs;
    EXPECT_NEAR(m.estimate(OpKind::AllReduce, "oneshot", 0), lat + p.msgUs + (n - 2) * (p.msgUs - p.oversubUs), 1e-9);
  }
  // Over sockets (COLL_TRANSPORT=tcp) every message also costs kernel CPU time, and the
  // one-shot's n(n-1) messages queue on the shared CPUs: measured 47 us against rd's 32
  // with 4 ranks, 183-220 against 92-108 with 8.
  Config tcp = cfg;
  tcp.set("COLL_TRANSPORT", "tcp");
  for (int n : {4, 8}) {
    JobTopo busy = jobWithCpus(std::vector<std::string>(n, "A"), 2, false);
    CostParams p = CostParams::forJob(tcp, 512 << 10, busy);
    EXPECT_TRUE(p.localInKernel);
    EXPECT_EQ(best(CostModel(busy, p), OpKind::AllReduce, 8, allReduceAlgos()), "rd") << n;
  }
  // Beyond kOneShotMaxRanks the model does not price it (nor the algorithm take the call).
  EXPECT_EQ(CostModel(makeJob(std::vector<std::string>(kOneShotMaxRanks + 1, "A")), CostParams{})
                .estimate(OpKind::AllReduce, "oneshot", 8),
            INFINITY);
  // CPUs to spare: a round costs no wait, and recursive doubling's fewer messages win.
  JobTopo calm = jobWithCpus(std::vector<std::string>(8, "A"), 1, true);
  EXPECT_EQ(best(CostModel(calm, CostParams::forJob(cfg, 512 << 10, calm)), OpKind::AllReduce, 8, allReduceAlgos()), "rd");
  JobTopo hosts = jobWithCpus({"A", "A", "B", "B"}, 2, false, 42);
  EXPECT_NE(best(CostModel(hosts, CostParams::forJob(cfg, 512 << 10, hosts)), OpKind::AllReduce, 8, allReduceAlgos()),
            "oneshot");
}

// Three ranks on 2 CPUs of one host: the double binary tree is one level deep, and a
// buffer of one pipeline chunk per half goes up and down it once (measured side by side
// with perf/topo/algo_sweep at 32 KiB: tree 11.3-11.6 us, rd 12.4-12.8, hd 15.3, ring
// 16.2). The model had priced the first chunk twice (the fill and one more period).
TEST(CostModel, AOneChunkTreeCostsItsFillAlone) {
  JobTopo three = jobWithCpus({"A", "A", "A"}, 2, false);
  CostModel m(three, CostParams::forJob(Config::fromEnv(), 512 << 10, three));
  EXPECT_EQ(best(m, OpKind::AllReduce, 32 << 10, allReduceAlgos()), "tree");
  EXPECT_NE(best(m, OpKind::AllReduce, 1 << 10, allReduceAlgos()), "tree");
}

// Two simulated hosts of 2 ranks on one 2-CPU kernel (the netns benchmark set-up): the
// pipelined algorithms' overlap needs CPUs the ranks do not have, so where the network
// is fast enough for the CPUs to be the bottleneck, halving-doubling costs about what the
// hierarchical algorithm does (measured side by side by perf/topo/algo_sweep, the two
// trade places within 10% from 1 MiB up), while with CPUs to spare the hierarchical one
// wins once its segments overlap the intra-host phases with the inter-host one (above
// COLL_HIER_SEGMENT_BYTES; at 1 MiB the two move the same bytes the same way, both
// pipelined). Time a slow link keeps the bytes in flight is still free for the
// intra-host phases, so across a slow network large sizes stay hierarchical.
TEST(CostModel, SharedCpusAddUpWhatPipelinesOverlap) {
  LinkTable fastNet = LinkTable::defaults();
  fastNet.applyOverrides("ethernet=12", true, "COLL_TOPO_LINK_BW");
  auto job = [](const LinkTable& t, bool shared) {
    auto mask = [=](int r) { return shared ? std::vector<int>{0, 1} : std::vector<int>{2 * r, 2 * r + 1}; };
    return makeJob({"A", "A", "B", "B"}, t, mask, shared ? 42 : 0);
  };
  Config cfg = Config::fromEnv();
  JobTopo shared = job(LinkTable::defaults(), true), sharedFast = job(fastNet, true);
  JobTopo spare = job(LinkTable::defaults(), false);
  CostParams ps = CostParams::forJob(cfg, 512 << 10, shared), pf = CostParams::forJob(cfg, 512 << 10, spare);
  EXPECT_TRUE(ps.sharedCpus);
  EXPECT_FALSE(pf.sharedCpus);
  EXPECT_DOUBLE_EQ(ps.overlap(3, 5), 8);
  EXPECT_DOUBLE_EQ(pf.overlap(3, 5), 5);
  CostModel ms(shared, ps), msFast(sharedFast, CostParams::forJob(cfg, 512 << 10, sharedFast)), mf(spare, pf);
  auto est = [](const CostModel& m, const char* a, size_t s) { return m.estimate(OpKind::AllReduce, a, s); };
  EXPECT_LT(est(ms, "hd", 1 << 20), est(ms, "hier", 1 << 20));
  for (size_t s : {size_t{1} << 20, size_t{16} << 20, size_t{256} << 20}) {
    EXPECT_LE(est(msFast, "hd", s), 1.1 * est(msFast, "hier", s)) << s;
    EXPECT_LE(est(msFast, "hier", s), 1.1 * est(msFast, "hd", s)) << s;
    if (s > ps.hierSegmentBytes) EXPECT_LT(est(mf, "hier", s), est(mf, "hd", s)) << s;
    else EXPECT_LE(est(mf, "hier", s), 1.1 * est(mf, "hd", s)) << s;
    // Nothing is cheaper for sharing the CPUs.
    for (const char* a : {"ring", "tree", "hier"})
      EXPECT_GE(est(ms, a, s), est(CostModel(shared, pf), a, s) - 1e-9) << a << " " << s;
  }
  EXPECT_LT(est(ms, "hier", 256 << 20), est(ms, "hd", 256 << 20)) << "slow network: hierarchical";
}

// The flat ring all-gather (reduce-scatter) sends n-1 blocks over each inter-host edge;
// the hierarchical one sends each host's L blocks to every other host once: (H-1) x L,
// and copies the whole buffer between rank order and column order, in segments that
// overlap the crossing with the work inside the hosts. Measured at 1 Gbit/s, 2 hosts x 2
// ranks (perf/topo/layout_collectives.sh): 1.56x and 1.39x faster than the ring at 1 and
// 16 MiB of output (1.45x at 16 MiB once in segments).
TEST(CostModel, HierarchicalGatherScatterSendEachHostsBlocksOnce) {
  LinkTable gigabit = LinkTable::defaults();
  gigabit.applyOverrides("ethernet=0.125", true, "COLL_TOPO_LINK_BW");
  for (auto hosts : {std::vector<std::string>{"A", "A", "B", "B"}, std::vector<std::string>{"A", "A", "A", "A", "B", "B", "B", "B"},
                     std::vector<std::string>{"A", "A", "B", "B", "C", "C"}}) {
    JobTopo job = makeJob(hosts, gigabit);
    CostModel m(job, CostParams{});
    const double n = static_cast<double>(hosts.size()), H = job.nhosts(), L = n / H;
    const double blk = 4 << 20, wire = blk / (0.125 * 1e3);
    for (OpKind k : {OpKind::AllGather, OpKind::ReduceScatter}) {
      const double hier = m.estimate(k, "hier", blk), ring = m.estimate(k, "ring", blk);
      EXPECT_GT(hier, (H - 1) * L * wire) << n;
      EXPECT_LT(hier, 1.15 * (H - 1) * L * wire) << n;
      EXPECT_GT(ring, (n - 1) * wire) << n;
      EXPECT_EQ(best(m, k, blk, {"ring", "rd", "hd", "hier"}), "hier") << n;
    }
  }
  // Simulated hosts on one kernel's 2 CPUs with the unshaped veth (as fast as a copy):
  // the copies and the kernel's work for the crossing take the same CPUs as everything
  // else. Measured: the ring 35-37 ms against 50 at 64 MiB of output, 12.2-13.2 against
  // 13.6-14.5 at 16 MiB; at 64 B-64 KiB the hierarchical all-gather 20-59 us against rd's
  // 34-84 and the ring's 44-100 (its fewer steps count there).
  JobTopo shared = jobWithCpus({"A", "A", "B", "B"}, 2, false, 42);
  CostModel ms(shared, CostParams::forJob(Config::fromEnv(), 512 << 10, shared));
  for (OpKind k : {OpKind::AllGather, OpKind::ReduceScatter})
    EXPECT_EQ(best(ms, k, 4 << 20, {"ring", "rd", "hd", "hier"}), "ring");
  EXPECT_EQ(best(ms, OpKind::AllGather, 1 << 10, {"ring", "rd", "hier"}), "hier");
  // Small reduce-scatters: halving-doubling measured level with it (19.5-27 us, the
  // hierarchical one 19.6-38 us at 64 B-1 KiB).
  EXPECT_EQ(best(ms, OpKind::ReduceScatter, 1 << 10, {"ring", "hd", "hier"}), "hd");
  // One host, or hosts of different sizes: not applicable.
  EXPECT_EQ(CostModel(makeJob({"A", "A", "A"}), CostParams{}).estimate(OpKind::AllGather, "hier", 1024), INFINITY);
  EXPECT_EQ(CostModel(makeJob({"A", "A", "B"}), CostParams{}).estimate(OpKind::ReduceScatter, "hier", 1024), INFINITY);
}

// Gather and scatter: the binomial tree's log2(n) rounds beat the root's n - 1 message
// costs for small blocks where every rank of a host has a CPU of its own (8 and 16 ranks);
// the direct exchange wins for large blocks (the tree moves them through more edges and
// copies). Across hosts the tree crosses the network in several rounds one after the
// other where the direct exchange crosses once; with 4 hosts of 4 ranks they are about
// even for tiny blocks. Ranks that share CPUs wait once for the direct exchange's n - 1
// peers together, and once per round of the tree: there direct wins at every size (8
// ranks on 2 CPUs, measured back to back with collGather: 4.5 us against 11.8 us at 8 B,
// 11.5 against 29.8 at 4 KiB).
TEST(CostModel, GatherAndScatterTakeTheTreeForSmallBlocksWhereRanksHaveCpus) {
  Config cfg = Config::fromEnv();
  const std::vector<const char*> algos = {"direct", "tree"};
  const std::vector<std::string> oneHost(8, "A");
  for (const auto& hosts : {oneHost, std::vector<std::string>(16, "A")}) {
    JobTopo job = makeJob(hosts);
    CostModel m(job, CostParams::forJob(cfg, 512 << 10, job));
    for (OpKind k : {OpKind::Gather, OpKind::Scatter}) {
      EXPECT_EQ(best(m, k, 8, algos), "tree") << hosts.size() << " ranks";
      EXPECT_EQ(best(m, k, 4 << 20, algos), "direct") << hosts.size() << " ranks";
      EXPECT_EQ(m.estimate(k, "pairwise", 8), INFINITY);
    }
  }
  JobTopo busy = jobWithCpus(oneHost, 2, false);
  CostModel m(busy, CostParams::forJob(cfg, 512 << 10, busy));
  for (size_t s : {size_t{8}, size_t{4} << 10, size_t{4} << 20}) EXPECT_EQ(best(m, OpKind::Gather, s, algos), "direct") << s;
  // One rank: the direct algorithm is a copy.
  EXPECT_EQ(CostModel(makeJob({"A"}), CostParams{}).estimate(OpKind::Scatter, "direct", 64), 0);
}

}  // namespace
}  // namespace coll
