// The shm transport with ranks as threads: every size class in both directions with
// windows of outstanding transfers, over several rank counts and the three data paths
// (single-copy, staged through the ring, staged through a tiny ring that wraps often).
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "base/socket.hpp"
#include "shm_test_util.hpp"
#include "transport/shm/shm_link.hpp"

namespace coll::shmtest {
namespace {

constexpr size_t kBig = (8u << 20) + 3;

enum class Path { SingleCopy, Staged, TinyRing };

const char* pathName(Path p) {
  switch (p) {
    case Path::SingleCopy: return "SingleCopy";
    case Path::Staged: return "Staged";
    case Path::TinyRing: return "TinyRing";
  }
  return "?";
}

Config configFor(Path p) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_CMA", p == Path::Staged ? "0" : "1");
  if (p == Path::TinyRing) {
    cfg.set("COLL_SHM_RING_BYTES", "4K");
    cfg.set("COLL_SHM_STAGE_CHUNK", "1K");
    cfg.set("COLL_SHM_CMA_THRESHOLD", "4K");
    cfg.set("COLL_SHM_CMA_CHUNK", "4K");
  }
  return cfg;
}

std::vector<size_t> sizesFor(const Config& cfg, int nranks) {
  size_t t = cfg.getSize("COLL_SHM_CMA_THRESHOLD");
  std::vector<size_t> s = {0, 1, shm::kInlineMax, shm::kInlineMax + 1, 63, 64, 4095, t - 1, t, t + 1};
  // Memory for every pair's buffers grows with nranks^2: keep 8 ranks' big one smaller.
  s.push_back(nranks <= 4 ? kBig : (1u << 20) + 3);
  return s;
}

// Every rank sends every size to every peer, all posted at once, and checks what it got.
// With mirrors, every send also asks for a copy of its data (Xfer::mirror).
void exchangeAll(LinkTable& links, int n, const std::vector<size_t>& sizes, bool mirrors = false) {
  runRanks(n, [&](int r) {
    size_t per = sizes.size();
    std::vector<std::vector<uint8_t>> sbuf, rbuf, mbuf;
    std::vector<Xfer> xs((n - 1) * per * 2);
    std::vector<Xfer*> all;
    std::vector<Link*> mine;
    size_t k = 0;
    for (auto& [peer, link] : links[r]) {
      mine.push_back(link.get());
      for (size_t i = 0; i < per; ++i) {
        sbuf.emplace_back(sizes[i]);
        fillPattern(sbuf.back(), r, peer, static_cast<int>(i));
      }
    }
    for (size_t j = 0; j < mine.size() * per; ++j) rbuf.emplace_back(sizes[j % per], 0xEE);
    size_t p = 0;
    for (auto& [peer, link] : links[r]) {
      for (size_t i = 0; i < per; ++i) {
        Xfer* s = &xs[k++];
        s->buf = sbuf[p * per + i].data();
        s->bytes = sizes[i];
        if (mirrors) {
          EXPECT_TRUE(link->copiesMirror());
          s->hints.mirror = mbuf.emplace_back(sizes[i], 0xEE).data();
        }
        link->postSend(s);
        Xfer* rv = &xs[k++];
        rv->buf = rbuf[p * per + i].data();
        rv->bytes = sizes[i];
        link->postRecv(rv);
        all.push_back(s);
        all.push_back(rv);
      }
      ++p;
    }
    drive(mine, all);
    p = 0;
    for (auto& [peer, link] : links[r]) {
      for (size_t i = 0; i < per; ++i) {
        EXPECT_EQ(firstMismatch(rbuf[p * per + i], peer, r, static_cast<int>(i)), -1)
            << "rank " << r << " from " << peer << " size " << sizes[i];
        if (mirrors) {
          EXPECT_EQ(firstMismatch(mbuf[p * per + i], r, peer, static_cast<int>(i)), -1)
              << "mirror of rank " << r << "'s send to " << peer << ", size " << sizes[i];
        }
      }
      ++p;
    }
    for (Xfer* x : all) EXPECT_EQ(x->done, x->bytes);
  });
}

class ShmExchange : public ::testing::TestWithParam<std::tuple<int, Path>> {};

TEST_P(ShmExchange, AllSizesBothDirectionsWithWindows) {
  auto [n, path] = GetParam();
  Config cfg = configFor(path);
  std::string tag = uniqueTag();
  LinkTable links = connectAll(n, cfg, tag);
  ASSERT_EQ(links.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) ASSERT_EQ(links[r].size(), static_cast<size_t>(n - 1));
  EXPECT_TRUE(shmLeftovers(tag).empty()) << "names must be unlinked once both sides attached";
  auto* l = dynamic_cast<shm::ShmLink*>(links[0].begin()->second.get());
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->singleCopySend(), path != Path::Staged);
  EXPECT_EQ(l->singleCopyRecv(), path != Path::Staged);
  exchangeAll(links, n, sizesFor(cfg, n));
  // A second round on the same links: counters and sequence numbers carry on.
  exchangeAll(links, n, {5, 100, 70000});
  // Sends that also copy their data into a mirror: push records on the single-copy
  // path, mirrored as staged pieces or inline otherwise.
  exchangeAll(links, n, sizesFor(cfg, n), true);
  links.clear();
  EXPECT_TRUE(shmLeftovers(tag).empty());
}

INSTANTIATE_TEST_SUITE_P(
    Shm, ShmExchange,
    ::testing::Combine(::testing::Values(2, 3, 4, 8),
                       ::testing::Values(Path::SingleCopy, Path::Staged, Path::TinyRing)),
    [](const auto& info) {
      return std::to_string(std::get<0>(info.param)) + "ranks_" + pathName(std::get<1>(info.param));
    });

// Each side tells the other the CPU it waits on; a waiter learns whether the peer it
// waits on last waited on its own CPU (then it stops spinning).
TEST(ShmLink, PeersTellEachOtherTheirCpu) {
  LinkTable links = connectAll(2, configFor(Path::TinyRing), uniqueTag());
  Link* a = links[0][1].get();
  Link* b = links[1][0].get();
  EXPECT_FALSE(a->peerSharesCpu(3)) << "b has told nothing yet";
  EXPECT_FALSE(b->peerSharesCpu(5)) << "a waited on 3, b on 5";
  EXPECT_TRUE(a->peerSharesCpu(5));
  EXPECT_TRUE(b->peerSharesCpu(5));
  EXPECT_FALSE(b->peerSharesCpu(0));
  EXPECT_FALSE(a->peerSharesCpu(5)) << "b moved to 0";
}

// stepOffCpu moves the thread off the given CPU and leaves its affinity as it was.
TEST(Waits, StepOffCpuMovesTheThreadAndKeepsItsAffinity) {
  std::thread t([] {
    cpu_set_t before;
    ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
    if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "needs 2 CPUs";
    for (int round = 0; round < 3; ++round) {
      const int cpu = currentCpu();
      ASSERT_GE(cpu, 0);
      ASSERT_TRUE(stepOffCpu(cpu));
      EXPECT_NE(currentCpu(), cpu) << "round " << round;
      cpu_set_t after;
      ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
      EXPECT_TRUE(CPU_EQUAL(&before, &after));
    }
    // A thread allowed one CPU alone stays there.
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(currentCpu(), &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    EXPECT_FALSE(stepOffCpu(currentCpu()));
    EXPECT_FALSE(stepOffCpu(-1));
  });
  t.join();
}

// Many more outstanding messages than the ring holds, the receiver posting late: the
// sender must stall on a full ring and resume, FIFO order intact.
TEST(ShmLink, DeepWindowThroughFullRing) {
  Config cfg = configFor(Path::TinyRing);
  LinkTable links = connectAll(2, cfg, uniqueTag());
  Link* a = links[0][1].get();
  Link* b = links[1][0].get();
  constexpr int kMsgs = 300;
  std::vector<std::vector<uint8_t>> sbuf(kMsgs), rbuf(kMsgs);
  std::vector<Xfer> sx(kMsgs), rx(kMsgs);
  std::vector<Xfer*> all;
  for (int i = 0; i < kMsgs; ++i) {
    sbuf[i].resize(1 + (i * 37) % 3000);
    fillPattern(sbuf[i], 0, 1, i);
    sx[i] = Xfer{sbuf[i].data(), sbuf[i].size()};
    a->postSend(&sx[i]);
    all.push_back(&sx[i]);
  }
  for (int i = 0; i < 10; ++i) a->progress();
  EXPECT_FALSE(sx[kMsgs - 1].complete) << "a 4K ring cannot hold them all";
  // One receive at a time: each frees part of the ring, so the sender's next pieces and
  // then the receiver's reads straddle the end of the ring (the wrap-around copies).
  for (int i = 0; i < kMsgs; ++i) {
    rbuf[i].assign(sbuf[i].size(), 0);
    rx[i] = Xfer{rbuf[i].data(), rbuf[i].size()};
    b->postRecv(&rx[i]);
    all.push_back(&rx[i]);
    drive({b, a}, {&rx[i]});
  }
  drive({a, b}, all);
  for (int i = 0; i < kMsgs; ++i) EXPECT_EQ(firstMismatch(rbuf[i], 0, 1, i), -1) << i;
}

// The real bootstrap (rendezvous root on loopback), its PeerInfo pids and host ids.
TEST(ShmConnect, OverRealBootstrap) {
  constexpr int n = 4;
  UniqueIdData id;
  randomSecret(id.secret, kSecretBytes);
  id.root = RendezvousRoot::start(parseAddr("127.0.0.1:0"), n, id.secret, 20);
  Config cfg = Config::fromEnv();
  std::string tag = uniqueTag();
  LinkTable links(n);
  std::vector<std::unique_ptr<Bootstrap>> boots(n);
  runRanks(n, [&](int r) {
    boots[r] = Bootstrap::connect(id, r, n, 20);
    TransportContext ctx;
    ctx.rank = r;
    ctx.nranks = n;
    ctx.cfg = &cfg;
    ctx.bootstrap = boots[r].get();
    for (const PeerInfo& p : boots[r]->peers()) {
      ctx.hostIds.push_back(p.hostId);
      ctx.pids.push_back(p.pid);
    }
    ctx.jobTag = tag;
    std::vector<int> peers;
    for (int p = 0; p < n; ++p)
      if (p != r && ctx.hostIds[p] == ctx.hostIds[r]) peers.push_back(p);
    links[r] = makeTransport("shm")->connect(ctx, peers);
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(links[r].size(), static_cast<size_t>(n - 1));
  exchangeAll(links, n, {0, 8, 1000, 300000});
  runRanks(n, [&](int r) { boots[r]->close(); });
  EXPECT_TRUE(shmLeftovers(tag).empty());
}

// Ranks with no shm peers still take part in connect's all-gathers.
TEST(ShmConnect, EmptyPeerListsStayInStep) {
  Config cfg = Config::fromEnv();
  std::string tag = uniqueTag();
  auto group = std::make_shared<ThreadGroup>(3);
  std::vector<std::map<int, std::unique_ptr<Link>>> links(3);
  runRanks(3, [&](int r) {
    ThreadBootstrap boot(group, r, 3);
    TransportContext ctx;
    ctx.rank = r;
    ctx.nranks = 3;
    ctx.cfg = &cfg;
    ctx.bootstrap = &boot;
    ctx.pids.assign(3, getpid());
    ctx.jobTag = tag;
    std::vector<int> peers;
    if (r == 0) peers = {2};
    if (r == 2) peers = {0};
    links[r] = makeTransport("shm")->connect(ctx, peers);
    boot.barrier();  // the gathers are in step: this one pairs up across all three
  });
  EXPECT_EQ(links[0].size(), 1u);
  EXPECT_TRUE(links[1].empty());
  EXPECT_EQ(links[2].size(), 1u);
  std::vector<uint8_t> out = {1, 2, 3}, in(3);
  Xfer s{out.data(), 3}, rv{in.data(), 3};
  links[2][0]->postSend(&s);
  links[0][2]->postRecv(&rv);
  drive({links[0][2].get(), links[2][0].get()}, {&s, &rv});
  EXPECT_EQ(in, out);
  EXPECT_TRUE(shmLeftovers(tag).empty());
}

// A rank with a bad setting fails with collInvalidArgument naming it; its peers fail
// promptly with collRemoteError instead of waiting in the all-gathers; nothing is left
// in /dev/shm.
class ShmBadSetting : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(ShmBadSetting, OnOneRankFailsAllPromptly) {
  const auto [name, value] = GetParam();
  Config good = Config::fromEnv();
  Config bad = good;
  bad.set(name, value);
  std::string tag = uniqueTag();
  auto group = std::make_shared<ThreadGroup>(3);
  std::vector<collResult_t> codes(3, collSuccess);
  std::vector<std::string> msgs(3);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] {
      ThreadBootstrap boot(group, r, 3);
      TransportContext ctx;
      ctx.rank = r;
      ctx.nranks = 3;
      ctx.cfg = r == 1 ? &bad : &good;
      ctx.bootstrap = &boot;
      ctx.jobTag = tag;
      std::vector<int> peers;
      for (int p = 0; p < 3; ++p)
        if (p != r) peers.push_back(p);
      try {
        makeTransport("shm")->connect(ctx, peers);
      } catch (const Error& e) {
        codes[r] = e.code();
        msgs[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(codes[1], collInvalidArgument) << msgs[1];
  EXPECT_NE(msgs[1].find(name), std::string::npos) << msgs[1];
  EXPECT_EQ(codes[0], collRemoteError) << msgs[0];
  EXPECT_EQ(codes[2], collRemoteError) << msgs[2];
  EXPECT_NE(msgs[0].find("rank 1"), std::string::npos) << msgs[0];
  EXPECT_TRUE(shmLeftovers(tag).empty());
}

INSTANTIATE_TEST_SUITE_P(ShmConnect, ShmBadSetting,
                         ::testing::Values(std::make_pair("COLL_SHM_RING_BYTES", "1000"),
                                           std::make_pair("COLL_SHM_CMA", "yes"),
                                           std::make_pair("COLL_SHM_CMA", "2"),
                                           std::make_pair("COLL_SHM_CMA_PROBE_MS", "-5"),
                                           // More than one process_vm_readv call copies.
                                           std::make_pair("COLL_SHM_CMA_CHUNK", "4G")),
                         [](const auto& info) { return "Case" + std::to_string(info.index); });

}  // namespace
}  // namespace coll::shmtest
