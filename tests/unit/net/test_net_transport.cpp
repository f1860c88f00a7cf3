// The net transport: which peers it serves (chooseTransports), how a missing or broken
// backend fails a communicator (on every rank, with the reason), and that a backend's
// failure in the middle of a collective ends the call on every rank instead of hanging.
// The collectives themselves run over it in tests/unit/collectives (COLL_TRANSPORT=net).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "collective.h"
#include "base/error.hpp"
#include "tests/unit/collectives/harness.hpp"
#include "transport/net/net_backend.hpp"
#include "transport/transport.hpp"

namespace {

using testing_coll::Job;
using testing_coll::onRanks;
using testing_coll::Tunables;

bool mentions(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::vector<std::string> choose(const std::string& mode, int rank, const std::vector<std::string>& hosts,
                                const std::vector<std::string>& backends) {
  std::vector<std::string> why(backends.size(), "no devices");
  return coll::chooseTransports(mode, rank, hosts, hosts, backends, why).perPeer;
}

TEST(ChooseTransports, AutoUsesTheBackendAcrossHostsWhereBothEndsHaveTheSameOne) {
  const std::vector<std::string> hosts = {"a", "a", "b", "b", "c"};
  EXPECT_TRUE(coll::needsNetOffers("auto", hosts));
  EXPECT_FALSE(coll::needsNetOffers("auto", {"a", "a"}));
  EXPECT_FALSE(coll::needsNetOffers("tcp", hosts));
  EXPECT_TRUE(coll::needsNetOffers("net", {"a", "a"}));
  // Rank 4 has another backend, rank 3 none.
  const std::vector<std::string> backends = {"ib", "ib", "ib", "", "ucx"};
  EXPECT_EQ(choose("auto", 0, hosts, backends), (std::vector<std::string>{"", "shm", "net", "tcp", "tcp"}));
  EXPECT_EQ(choose("auto", 3, hosts, backends), (std::vector<std::string>{"tcp", "tcp", "shm", "", "tcp"}));
  EXPECT_EQ(choose("tcp", 0, hosts, backends), (std::vector<std::string>{"", "tcp", "tcp", "tcp", "tcp"}));
  // Both ends of every pair agree, and so does every rank on whether net is set up.
  for (int a = 0; a < 5; ++a) {
    std::vector<std::string> why(5, "");
    auto ca = coll::chooseTransports("auto", a, hosts, hosts, backends, why);
    EXPECT_TRUE(ca.anyNet);
    for (int b = 0; b < 5; ++b)
      if (a != b) {
        EXPECT_EQ(ca.perPeer[b], choose("auto", b, hosts, backends)[a]) << a << "-" << b;
      }
  }
  std::vector<std::string> why(3, "");
  EXPECT_FALSE(coll::chooseTransports("auto", 0, {"a", "b", "b"}, {"a", "b", "b"}, {"", "ib", "ib"}, why).anyNet);
}

// What the cost model learns from the choice: which ranks reach other hosts by kernel
// bypass (the built-in InfiniBand backend), which through TCP, and which through a
// plugin that does not say. The same list on every rank.
TEST(ChooseTransports, TellsTheCostModelHowEachRankReachesOtherHosts) {
  using coll::NetPath;
  const std::vector<std::string> hosts = {"a", "a", "b", "b", "c"};
  const std::vector<std::string> backends = {"ib", "ib", "ib", "", "ucx"}, why(5, "");
  const std::vector<NetPath> want = {NetPath::Bypass, NetPath::Bypass, NetPath::Bypass, NetPath::Kernel,
                                     NetPath::Unknown};
  for (int r = 0; r < 5; ++r) EXPECT_EQ(coll::chooseTransports("auto", r, hosts, hosts, backends, why).netPaths, want);
  EXPECT_EQ(coll::chooseTransports("tcp", 0, hosts, hosts, backends, why).netPaths, std::vector<NetPath>(5, NetPath::Kernel));
  // No offers made (one host, or tcp): every path is the kernel's.
  EXPECT_EQ(coll::chooseTransports("auto", 0, {"a", "a"}, {"a", "a"}, {}, {}).netPaths,
            std::vector<NetPath>(2, NetPath::Kernel));
}

TEST(ChooseTransports, ForcedNetNeedsTheSameBackendEverywhere) {
  const std::vector<std::string> hosts = {"a", "a", "b"};
  EXPECT_EQ(choose("net", 1, hosts, {"ib", "ib", "ib"}), (std::vector<std::string>{"net", "", "net"}));
  try {
    choose("net", 0, hosts, {"ib", "ib", ""});
    ADD_FAILURE() << "no error";
  } catch (const coll::Error& e) {
    EXPECT_EQ(e.code(), collInvalidUsage);
    EXPECT_TRUE(mentions(e.what(), "rank 2 (b) has no network backend: no devices")) << e.what();
  }
  try {
    choose("net", 0, hosts, {"ib", "ucx", "ib"});
    ADD_FAILURE() << "no error";
  } catch (const coll::Error& e) {
    EXPECT_TRUE(mentions(e.what(), "rank 1 'ucx'")) << e.what();
  }
  EXPECT_THROW(choose("shm", 0, hosts, {}), coll::Error);
  EXPECT_THROW(choose("pigeon", 0, {"a"}, {}), coll::Error);
}

// Makes an n-rank job with `tunables` and returns each rank's result and error text.
struct InitOutcome {
  std::vector<collResult_t> rc;
  std::vector<std::string> text;
};
InitOutcome tryInit(int n, const Tunables& tunables) {
  collUniqueId id;
  EXPECT_EQ(collGetUniqueId(&id), collSuccess);
  InitOutcome o{std::vector<collResult_t>(n), std::vector<std::string>(n)};
  std::vector<collComm_t> comms(n, nullptr);
  onRanks(n, [&](int r) {
    o.rc[r] = testing_coll::initRank(&comms[r], n, id, r, tunables);
    o.text[r] = collGetLastError(nullptr);
    if (comms[r]) collCommDestroy(comms[r]);
  });
  return o;
}

collNetProperties_t device(const char* name) {
  collNetProperties_t p{};
  snprintf(p.name, sizeof p.name, "%s", name);
  p.maxRequests = 1;
  return p;
}

// A rank uses the NIC the topology chose for it (which the cost model priced and the
// leaders were chosen by), spread over that NIC's ports; where the backend has no such
// device (another machine's topology file, a plugin's own names), over all devices.
TEST(NetTransport, TheRankUsesTheTopologysNic) {
  const std::vector<collNetProperties_t> devs{device("mlx5_0:1"), device("mlx5_1:1"), device("mlx5_2:1"),
                                              device("mlx5_2:2"), device("mlx5_10:1")};
  EXPECT_EQ(coll::net::pickDevice(devs, "mlx5_1", 0), 1);
  EXPECT_EQ(coll::net::pickDevice(devs, "mlx5_1", 3), 1) << "local rank 3 would be mlx5_2:2 by rotation";
  EXPECT_EQ(coll::net::pickDevice(devs, "mlx5_2", 0), 2);
  EXPECT_EQ(coll::net::pickDevice(devs, "mlx5_2", 1), 3);
  EXPECT_EQ(coll::net::pickDevice(devs, "mlx5_2", 2), 2);
  EXPECT_EQ(coll::net::pickDevice(devs, "mlx5_10", 0), 4);
  EXPECT_EQ(coll::net::pickDevice(devs, "mlx5_", 1), 1) << "a prefix of a name is not the name";
  EXPECT_EQ(coll::net::pickDevice(devs, "", 7), 2);
  EXPECT_EQ(coll::net::pickDevice(devs, "eth0", 4), 4);
  EXPECT_EQ(coll::net::pickDevice({device("ucx:tcp")}, "mlx5_0", 5), 0);
  EXPECT_EQ(coll::net::pickDevice({}, "mlx5_0", 0), -1);
}

TEST(NetTransport, WithoutABackendEveryRankFailsAndSaysWhy) {
  const Tunables net = {{"COLL_TRANSPORT", "net"}, {"COLL_TIMEOUT", "20"}};
  auto with = [&](const Tunables& more) {
    Tunables all = net;
    all.insert(all.end(), more.begin(), more.end());
    return all;
  };
  {
    auto o = tryInit(2, with({{"COLL_NET_PLUGIN", "/nonexistent/libnothing.so"}}));
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(o.rc[r], collInvalidUsage) << o.text[r];
      EXPECT_TRUE(mentions(o.text[r], "/nonexistent/libnothing.so")) << o.text[r];
    }
  }
  {
    auto o = tryInit(2, with({{"COLL_NET_PLUGIN", NET_BAD_VERSION_SO}}));
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(mentions(o.text[r], "interface version 99")) << o.text[r];
  }
  {
    auto o = tryInit(2, with({{"COLL_NET_PLUGIN", NOT_A_NET_PLUGIN_SO}}));
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(mentions(o.text[r], "does not export collNetPlugin_v1")) << o.text[r];
  }
  {
    // The built-in InfiniBand backend: this machine has no RDMA device (or the build has
    // no libibverbs); either way the text says so.
    auto o = tryInit(2, with({{"COLL_NET_PLUGIN", ""}}));
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(o.rc[r], collInvalidUsage) << o.text[r];
      EXPECT_TRUE(mentions(o.text[r], "has no network backend: InfiniBand")) << o.text[r];
    }
  }
  {
    auto o = tryInit(2, with({{"COLL_NET", "none"}}));
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(mentions(o.text[r], "COLL_NET=none")) << o.text[r];
  }
}

// The loop plugin's controls (tests/unit/net/loop_backend.cpp).
struct Loop {
  Loop() {
    h = dlopen(NET_LOOP_SO, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << dlerror();
    messages = reinterpret_cast<uint64_t (*)()>(dlsym(h, "loopMessages"));
    failAfter = reinterpret_cast<void (*)(int64_t)>(dlsym(h, "loopFailAfter"));
  }
  ~Loop() { dlclose(h); }
  void* h = nullptr;
  uint64_t (*messages)() = nullptr;
  void (*failAfter)(int64_t) = nullptr;
};

TEST(NetTransport, CollectivesGoThroughThePlugin) {
  Loop loop;
  ASSERT_TRUE(loop.messages);
  Job job(3, {{"COLL_TRANSPORT", "net"}, {"COLL_NET_PLUGIN", NET_LOOP_SO}});
  ASSERT_TRUE(job.ok());
  const uint64_t before = loop.messages();
  job.run([&](int r, collComm_t c) {
    std::vector<int32_t> v(100000, r + 1);
    ASSERT_EQ(collAllReduce(v.data(), v.data(), v.size(), collInt32, collSum, c, nullptr), collSuccess);
    for (size_t i = 0; i < v.size(); i += 997) ASSERT_EQ(v[i], 6);
  });
  EXPECT_GE(loop.messages() - before, 6u);  // each of 3 ranks sent something to each peer
}

TEST(NetTransport, ABackendFailureEndsTheCallOnEveryRank) {
  Loop loop;
  ASSERT_TRUE(loop.failAfter);
  Job job(3, {{"COLL_TRANSPORT", "net"}, {"COLL_NET_PLUGIN", NET_LOOP_SO}, {"COLL_TIMEOUT", "60"}});
  ASSERT_TRUE(job.ok());
  std::vector<collResult_t> rc(3);
  std::vector<std::string> text(3);
  loop.failAfter(5);
  auto t0 = std::chrono::steady_clock::now();
  job.run([&](int r, collComm_t c) {
    std::vector<float> v(1 << 20, 1.0f);
    rc[r] = collAllReduce(v.data(), v.data(), v.size(), collFloat32, collSum, c, nullptr);
    text[r] = collGetLastError(c);
  });
  loop.failAfter(-1);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 20) << "the ranks waited for the timeout instead of hearing of the failure";
  bool named = false;
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(rc[r], collSuccess) << "rank " << r;
    if (mentions(text[r], "loop: injected failure on loop0")) named = true;
  }
  EXPECT_TRUE(named) << text[0];
}

}  // namespace
