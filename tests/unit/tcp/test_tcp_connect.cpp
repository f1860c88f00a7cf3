// Connection setup of the TCP transport (peer sets, settings negotiation, hostile clients)
// and the pure striping rule.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>

#include "tcp_harness.hpp"
#include "transport/tcp/tcp_connect.hpp"
#include "transport/tcp/tcp_link.hpp"
#include "transport/tcp/tcp_wire.hpp"
#include "bootstrap/handshake.hpp"

namespace coll::tcptest {
namespace {

TEST(TcpWire, PieceLayout) {
  EXPECT_EQ(tcp::pieceCount(0, 4096), 1u);
  EXPECT_EQ(tcp::pieceCount(1, 4096), 1u);
  EXPECT_EQ(tcp::pieceCount(4096, 4096), 1u);
  EXPECT_EQ(tcp::pieceCount(4097, 4096), 2u);
  EXPECT_EQ(tcp::pieceLength(4097, 0, 4096), 4096u);
  EXPECT_EQ(tcp::pieceLength(4097, 1, 4096), 1u);
  EXPECT_EQ(tcp::pieceLength(0, 0, 4096), 0u);
  EXPECT_EQ(tcp::pieceOffset(3, 4096), 3u * 4096);
  // The first piece of message seq rides on stream seq % S, the rest round-robin after it.
  EXPECT_EQ(tcp::pieceStream(7, 0, 3), 1);
  EXPECT_EQ(tcp::pieceStream(7, 1, 3), 2);
  EXPECT_EQ(tcp::pieceStream(7, 2, 3), 0);
  for (int S : {1, 2, 3, 5})
    for (uint64_t seq : {0ull, 1ull, 4ull, 1000001ull})
      for (int s = 0; s < S; ++s) {
        uint32_t first = tcp::firstPieceOn(seq, s, S);
        EXPECT_LT(first, uint32_t(S));
        EXPECT_EQ(tcp::pieceStream(seq, first, S), s);
      }
}

// A peer list may leave a rank out entirely; it still takes part in the exchange.
TEST(TcpConnect, RankWithNoPeersStillJoinsTheExchange) {
  Job job = startJob(3);
  runRanks(3, [&](int rank) {
    auto env = joinJob(job, rank, Config::fromEnv());
    std::vector<int> peers;
    if (rank < 2) peers = {1 - rank};
    Links links = makeTcpTransport()->connect(env->ctx, peers);
    EXPECT_EQ(links.size(), peers.size());
    if (rank < 2) {
      int v = 100 + rank, got = -1;
      Xfer s{&v, sizeof v}, r{&got, sizeof got};
      links.at(1 - rank)->postSend(&s);
      links.at(1 - rank)->postRecv(&r);
      waitAll({links.at(1 - rank).get()}, {&s, &r});
      EXPECT_EQ(got, 100 + (1 - rank));
    }
    env->bs->barrier();
  });
}

// Rank 0 joins the address exchange and then fails (as when it runs out of descriptors):
// ranks 1 and 2, waiting for its connections, fail with its reason as soon as the
// bootstrap reports it, instead of timing out.
TEST(TcpConnect, FailedRankEndsTheWaitForItsConnections) {
  Job job = startJob(3);
  std::vector<collResult_t> codes(3, collSuccess);
  std::vector<std::string> whats(3);
  runRanks(3, [&](int rank) {
    auto env = joinJob(job, rank, Config::fromEnv(), /*timeoutSec=*/5);
    if (rank == 0) {
      tcp::ListenRecord rec{tcp::kRecordMagic, 1, 1 << 20, {}};  // listens for nobody
      env->bs->allGather(&rec, sizeof rec);
      env->bs->abort("rank 0 ran out of file descriptors");
      env->bs.reset();
      return;
    }
    try {
      makeTcpTransport()->connect(env->ctx, allOthers(rank, 3));
    } catch (const Error& e) {
      codes[rank] = e.code();
      whats[rank] = e.what();
    }
  });
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(codes[r], collRemoteError) << "rank " << r << ": " << whats[r];
    EXPECT_NE(whats[r].find("rank 0 ran out of file descriptors"), std::string::npos) << whats[r];
  }
}

// The most ranks the library runs on one host, every pair connected with several streams.
TEST(TcpConnect, EightRanksAllPairs) {
  const int n = 8;
  Config cfg = Config::fromEnv();
  cfg.set("COLL_TCP_STREAMS", "3");
  cfg.set("COLL_TCP_CHUNK", "4K");
  Job job = startJob(n);
  runRanks(n, [&](int rank) {
    auto env = joinJob(job, rank, cfg);
    Links links = makeTcpTransport()->connect(env->ctx, allOthers(rank, n));
    ASSERT_EQ(links.size(), size_t(n - 1));
    const std::vector<size_t> sizes = {0, 1, 4096 * 3 + 5};
    std::map<int, std::vector<std::vector<uint8_t>>> sb, rb;
    std::map<int, std::vector<Xfer>> sx, rx;
    std::vector<Link*> ls;
    std::vector<Xfer*> all;
    for (auto& [peer, link] : links) {
      ls.push_back(link.get());
      sx[peer].resize(sizes.size());
      rx[peer].resize(sizes.size());
      for (size_t m = 0; m < sizes.size(); ++m) {
        sb[peer].emplace_back(sizes[m]);
        rb[peer].emplace_back(sizes[m]);
        for (size_t i = 0; i < sizes[m]; ++i) sb[peer][m][i] = pattern(rank, peer, int(m), i);
      }
      for (size_t m = 0; m < sizes.size(); ++m) {
        sx[peer][m] = Xfer{sb[peer][m].data(), sizes[m]};
        rx[peer][m] = Xfer{rb[peer][m].data(), sizes[m]};
        link->postSend(&sx[peer][m]);
        link->postRecv(&rx[peer][m]);
        all.push_back(&sx[peer][m]);
        all.push_back(&rx[peer][m]);
      }
    }
    waitAll(ls, all);
    for (auto& [peer, bufs] : rb)
      for (size_t m = 0; m < sizes.size(); ++m)
        for (size_t i = 0; i < sizes[m]; ++i)
          ASSERT_EQ(bufs[m][i], pattern(peer, rank, int(m), i)) << "from " << peer << " msg " << m;
    env->bs->barrier();
  });
}

TEST(TcpConnect, BadPeerListIsInvalidArgument) {
  Job job = startJob(1);
  auto env = joinJob(job, 0, Config::fromEnv());
  try {
    makeTcpTransport()->connect(env->ctx, {0});
    ADD_FAILURE() << "connecting to itself was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument);
  }
}

// Ranks asking for different stream counts and chunks settle on the smaller of each.
TEST(TcpConnect, DifferentSettingsSettleOnTheSmaller) {
  Job job = startJob(2);
  runRanks(2, [&](int rank) {
    Config cfg = Config::fromEnv();
    cfg.set("COLL_TCP_STREAMS", rank == 0 ? "4" : "2");
    cfg.set("COLL_TCP_CHUNK", rank == 0 ? "4K" : "64K");
    auto env = joinJob(job, rank, cfg);
    Links links = makeTcpTransport()->connect(env->ctx, {1 - rank});
    auto* l = dynamic_cast<tcp::TcpLink*>(links.at(1 - rank).get());
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->streams(), 2);
    std::vector<uint8_t> s(100000), r(100000);
    for (size_t i = 0; i < s.size(); ++i) s[i] = pattern(rank, 1 - rank, 0, i);
    Xfer xs{s.data(), s.size()}, xr{r.data(), r.size()};
    l->postSend(&xs);
    l->postRecv(&xr);
    waitAll({l}, {&xs, &xr});
    for (size_t i = 0; i < r.size(); ++i) ASSERT_EQ(r[i], pattern(1 - rank, rank, 0, i)) << i;
    env->bs->barrier();
  });
}

// Wraps a real bootstrap; after the address exchange it lets `onGathered` act first.
class SpyBootstrap : public Bootstrap {
 public:
  SpyBootstrap(Bootstrap* inner, std::function<void(const std::vector<uint8_t>&)> f)
      : in_(inner), onGathered_(std::move(f)) {}
  int rank() const override { return in_->rank(); }
  int nranks() const override { return in_->nranks(); }
  const std::vector<PeerInfo>& peers() const override { return in_->peers(); }
  std::vector<uint8_t> allGather(const void* mine, size_t bytes) override {
    auto all = in_->allGather(mine, bytes);
    onGathered_(all);
    return all;
  }
  void barrier() override { in_->barrier(); }
  bool failureReported(std::string* why) override { return in_->failureReported(why); }
  void abort(const std::string& why) override { in_->abort(why); }
  void close() override { in_->close(); }

 private:
  Bootstrap* in_;
  std::function<void(const std::vector<uint8_t>&)> onGathered_;
};

std::vector<uint8_t> hello(uint32_t rank, uint32_t stream, uint32_t streams, const std::string& tag) {
  uint32_t f[4] = {rank, stream, streams, uint32_t(tag.size())};
  std::vector<uint8_t> h(sizeof f + tag.size());
  memcpy(h.data(), f, sizeof f);
  memcpy(h.data() + sizeof f, tag.data(), tag.size());
  return h;
}

// Plays every kind of unwelcome client against rank 1's listener before rank 0's real
// streams arrive; rank 1 must drop them all and still connect promptly.
void attack(const sockaddr_storage& addr, const uint8_t* secret, std::vector<Socket>* keep) {
  Deadline dl(10);
  {  // garbage instead of a handshake
    Socket s = connectWithRetry(addr, dl);
    std::vector<uint8_t> junk(300);
    for (size_t i = 0; i < junk.size(); ++i) junk[i] = uint8_t(i * 7 + 1);
    sendAll(s.fd(), junk.data(), junk.size(), dl);
  }
  connectWithRetry(addr, dl);            // connects and hangs up at once
  keep->push_back(connectWithRetry(addr, dl));  // connects and never says a word
  uint8_t wrong[kSecretBytes];
  memcpy(wrong, secret, kSecretBytes);
  wrong[5] ^= 1;
  auto h = hello(0, 0, 1, "tcptest");
  for (auto [sec, role] : {std::pair{(const uint8_t*)wrong, ConnRole::Tcp},
                           std::pair{secret, ConnRole::Bootstrap}}) {
    Socket s = connectWithRetry(addr, dl);
    EXPECT_THROW(clientHandshake(s.fd(), sec, role, h.data(), h.size(), dl), Error);
  }
  // Right secret and role, wrong hello: each is dropped after the handshake.
  for (const auto& bad : {hello(0, 0, 1, "another-comm"), hello(5, 0, 1, "tcptest"),
                          hello(0, 7, 1, "tcptest"), hello(0, 0, 3, "tcptest"),
                          std::vector<uint8_t>{1, 2, 3}}) {
    Socket s = connectWithRetry(addr, dl);
    clientHandshake(s.fd(), secret, ConnRole::Tcp, bad.data(), bad.size(), dl);
    keep->push_back(std::move(s));
  }
}

TEST(TcpConnect, HostileClientsAreDroppedAndTheJobConnects) {
  Job job = startJob(2);
  std::vector<Socket> keep;  // silent sockets stay open until the end
  runRanks(2, [&](int rank) {
    Config cfg = Config::fromEnv();
    cfg.set("COLL_TCP_STREAMS", "1");
    auto env = joinJob(job, rank, cfg);
    SpyBootstrap spy(env->bs.get(), [&](const std::vector<uint8_t>& all) {
      if (rank != 0) return;
      tcp::ListenRecord rec;
      ASSERT_EQ(all.size(), 2 * sizeof rec);
      memcpy(&rec, all.data() + sizeof rec, sizeof rec);
      attack(rec.addr, job.id.secret, &keep);
    });
    env->ctx.bootstrap = &spy;
    auto t0 = std::chrono::steady_clock::now();
    Links links = makeTcpTransport()->connect(env->ctx, {1 - rank});
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(secs, 5.0) << "an unwelcome client held up connecting";
    Link* l = links.at(1 - rank).get();
    uint64_t v = 0xABCDEF00 + rank, got = 0;
    Xfer xs{&v, 8}, xr{&got, 8};
    l->postSend(&xs);
    l->postRecv(&xr);
    waitAll({l}, {&xs, &xr}, 10);
    EXPECT_EQ(got, 0xABCDEF00u + (1 - rank));
    env->bs->barrier();
  });
}

// Rank 0's connection waits in rank 1's backlog ahead of 300 strangers
// that never say a word. Rank 1 accepts them all at once, more than it keeps unproven,
// and drops the oldest: rank 0's. Told that rank 1 was busy, rank 0 connects again (and
// strangers coming later must not keep it out either); the links form.
TEST(TcpConnect, FloodOfUnprovenConnectionsDoesNotKeepAPeerOut) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = std::min<rlim_t>(4096, rl.rlim_max);
  setrlimit(RLIMIT_NOFILE, &rl);
  Job job = startJob(2);
  std::vector<Socket> flood;
  struct Joined {  // joined also when a rank fails
    std::thread t;
    ~Joined() { if (t.joinable()) t.join(); }
  } strangers;
  runRanks(2, [&](int rank) {
    Config cfg = Config::fromEnv();
    cfg.set("COLL_TCP_STREAMS", "2");
    auto env = joinJob(job, rank, cfg);
    SpyBootstrap spy(env->bs.get(), [&](const std::vector<uint8_t>& all) {
      if (rank == 1) {  // busy elsewhere while the backlog fills
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        return;
      }
      tcp::ListenRecord rec;
      ASSERT_EQ(all.size(), 2 * sizeof rec);
      memcpy(&rec, all.data() + sizeof rec, sizeof rec);
      strangers.t = std::thread([&flood, addr = rec.addr] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0 connected first
        for (int i = 0; i < 300; ++i) flood.push_back(connectWithRetry(addr, Deadline(5)));
      });
    });
    env->ctx.bootstrap = &spy;
    Links links = makeTcpTransport()->connect(env->ctx, {1 - rank});
    Link* l = links.at(1 - rank).get();
    uint64_t v = 0x5151000 + rank, got = 0;
    Xfer xs{&v, 8}, xr{&got, 8};
    l->postSend(&xs);
    l->postRecv(&xr);
    waitAll({l}, {&xs, &xr}, 10);
    EXPECT_EQ(got, 0x5151000u + (1 - rank));
    env->bs->barrier();
  });
}

}  // namespace
}  // namespace coll::tcptest
