// Data path of TCP links between ranks-as-threads: content, ordering, striping, errors.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "tcp_harness.hpp"
#include "transport/tcp/tcp_link.hpp"
#include "transport/tcp/tcp_wire.hpp"

namespace coll::tcptest {
namespace {

const std::vector<size_t> kSizes = {0, 1, 7, 4096 + 3, (8u << 20) + 5, 0, 1, 7, 4096 + 3};

struct Shape {
  int nranks;
  const char* streams;
  const char* chunk;
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << s.nranks << " ranks, " << s.streams << " streams, chunk " << s.chunk;
}

class TcpExchange : public ::testing::TestWithParam<Shape> {};

// Every rank sends kSizes to every other rank and receives the same from each, all posted
// at once (recvs first on even ranks, sends first on odd ones), both directions together.
TEST_P(TcpExchange, AllSizesBothDirectionsManyOutstanding) {
  const Shape sh = GetParam();
  Config cfg = Config::fromEnv();
  cfg.set("COLL_TCP_STREAMS", sh.streams);
  cfg.set("COLL_TCP_CHUNK", sh.chunk);
  Job job = startJob(sh.nranks);
  runRanks(sh.nranks, [&](int rank) {
    auto env = joinJob(job, rank, cfg);
    Links links = makeTcpTransport()->connect(env->ctx, allOthers(rank, sh.nranks));
    ASSERT_EQ(links.size(), size_t(sh.nranks - 1));
    const size_t M = kSizes.size();
    std::map<int, std::vector<std::vector<uint8_t>>> sbuf, rbuf;
    std::map<int, std::vector<Xfer>> sx, rx;
    std::vector<Xfer*> all;
    std::vector<Link*> ls;
    for (auto& [peer, link] : links) {
      EXPECT_STREQ(link->transportName(), "tcp");
      ls.push_back(link.get());
      sbuf[peer].resize(M);
      rbuf[peer].resize(M);
      sx[peer].resize(M);
      rx[peer].resize(M);
      for (size_t m = 0; m < M; ++m) {
        sbuf[peer][m].resize(kSizes[m]);
        for (size_t i = 0; i < kSizes[m]; ++i) sbuf[peer][m][i] = pattern(rank, peer, int(m), i);
        rbuf[peer][m].assign(kSizes[m], 0xEE);
        sx[peer][m] = Xfer{sbuf[peer][m].data(), kSizes[m]};
        rx[peer][m] = Xfer{rbuf[peer][m].data(), kSizes[m]};
      }
      for (size_t m = 0; m < M; ++m) {
        if (rank % 2) link->postSend(&sx[peer][m]);
        link->postRecv(&rx[peer][m]);
        if (rank % 2 == 0) link->postSend(&sx[peer][m]);
        all.push_back(&sx[peer][m]);
        all.push_back(&rx[peer][m]);
      }
    }
    waitAll(ls, all);
    for (auto& [peer, bufs] : rbuf)
      for (size_t m = 0; m < M; ++m) {
        EXPECT_EQ(rx[peer][m].done, kSizes[m]);
        EXPECT_EQ(sx[peer][m].done, kSizes[m]);
        size_t bad = 0;
        for (size_t i = 0; i < kSizes[m]; ++i) bad += bufs[m][i] != pattern(peer, rank, int(m), i);
        EXPECT_EQ(bad, 0u) << "rank " << rank << " message " << m << " from " << peer;
      }
    env->bs->barrier();
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, TcpExchange,
                         ::testing::Values(Shape{2, "1", "512K"}, Shape{2, "3", "4K"},
                                           Shape{3, "2", "64K"}, Shape{4, "4", "4K"},
                                           Shape{4, "1", "1M"}),
                         [](const auto& info) {
                           return "r" + std::to_string(info.param.nranks) + "_s" +
                                  info.param.streams + "_c" + info.param.chunk;
                         });

// Two ranks with links to each other; fn(rank, link, bootstrap).
void pair(const char* streams, const char* chunk,
          const std::function<void(int, std::unique_ptr<Link>&, Bootstrap&)>& fn);

// Hundreds of messages of random sizes (empty, tiny, spanning many pieces and streams)
// through a sliding window; the receiver keeps fewer receives posted than the sender has
// sends, so streams stall on unposted receives and resume.
TEST(TcpStress, RandomSizesSlidingWindows) {
  pair("3", "4K", [&](int rank, std::unique_ptr<Link>& link, Bootstrap& bs) {
    const int n = 600;
    std::vector<size_t> sizes(n);
    uint64_t rng = 12345;
    for (auto& s : sizes) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      uint64_t r = rng >> 33;
      s = (r % 4 == 0) ? 0 : (r % 4 == 1) ? r % 16 : (r % 4 == 2) ? r % 5000 : r % 40000;
    }
    std::vector<std::vector<uint8_t>> sb(n), rb(n);
    std::vector<Xfer> sx(n), rx(n);
    for (int m = 0; m < n; ++m) {
      sb[m].resize(sizes[m]);
      for (size_t i = 0; i < sizes[m]; ++i) sb[m][i] = pattern(rank, 1 - rank, m, i);
      rb[m].assign(sizes[m], 0);
      sx[m] = Xfer{sb[m].data(), sizes[m]};
      rx[m] = Xfer{rb[m].data(), sizes[m]};
    }
    const int sendWin = 24, recvWin = 5;
    int sp = 0, rp = 0, sd = 0, rd = 0;
    Deadline dl(30);
    while (sd < n || rd < n) {
      while (sp < n && sp - sd < sendWin) link->postSend(&sx[sp++]);
      while (rp < n && rp - rd < recvWin) link->postRecv(&rx[rp++]);
      link->progress();
      while (sd < sp && sx[sd].complete) ++sd;
      while (rd < rp && rx[rd].complete) ++rd;
      ASSERT_FALSE(dl.expired()) << "sent " << sd << " received " << rd;
    }
    for (int m = 0; m < n; ++m) {
      ASSERT_EQ(rx[m].done, sizes[m]);
      for (size_t i = 0; i < sizes[m]; ++i)
        ASSERT_EQ(rb[m][i], pattern(1 - rank, rank, m, i)) << "message " << m << " byte " << i;
    }
    bs.barrier();
  });
}

void pair(const char* streams, const char* chunk,
          const std::function<void(int, std::unique_ptr<Link>&, Bootstrap&)>& fn) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_TCP_STREAMS", streams);
  cfg.set("COLL_TCP_CHUNK", chunk);
  Job job = startJob(2);
  runRanks(2, [&](int rank) {
    auto env = joinJob(job, rank, cfg);
    Links links = makeTcpTransport()->connect(env->ctx, {1 - rank});
    fn(rank, links.at(1 - rank), *env->bs);
  });
}

std::string remoteErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.code() == collRemoteError) return e.what();
    return std::string("wrong code: ") + e.what();
  }
  return "no error";
}

TEST(TcpErrors, SizeMismatchIsRemoteErrorWithBothSizes) {
  for (bool senderBigger : {true, false}) {
    pair("3", "4K", [&](int rank, std::unique_ptr<Link>& link, Bootstrap& bs) {
      // Message 1 disagrees; with 3 streams and 4K pieces its pieces span several streams.
      size_t mine = 9000, theirs = senderBigger ? 5000 : 13000;
      std::vector<uint8_t> a(10, 1), b(std::max(mine, theirs), 2), c(20, 3);
      Xfer x0{a.data(), a.size()}, x1{b.data(), rank == 0 ? mine : theirs}, x2{c.data(), c.size()};
      if (rank == 0) {
        link->postSend(&x0);
        link->postSend(&x1);
        link->postSend(&x2);
        waitAll({link.get()}, {&x0, &x1, &x2});
      } else {
        link->postRecv(&x0);
        link->postRecv(&x1);
        link->postRecv(&x2);
        std::string what = remoteErrorOf([&] { waitAll({link.get()}, {&x0, &x1, &x2}, 10); });
        EXPECT_NE(what.find("size mismatch"), std::string::npos) << what;
        EXPECT_NE(what.find(std::to_string(mine)), std::string::npos) << what;
        EXPECT_NE(what.find(std::to_string(theirs)), std::string::npos) << what;
        EXPECT_TRUE(x0.complete);
      }
      bs.barrier();
    });
  }
}

// The same, with the order of arrival forced: message 1's bad header arrives on its
// stream before message 0 (sent first, on another stream) has. Message 0 is delivered,
// then the mismatch is reported; the link does not fail while message 0 is on its way.
TEST(TcpErrors, SizeMismatchWaitsForEarlierMessagesOnOtherStreams) {
  int sv[3][2];
  std::vector<Socket> mine;
  for (auto& p : sv) {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, p), 0);
    mine.emplace_back(p[0]);
  }
  tcp::TcpLink link(1, std::move(mine), 4096);
  std::vector<uint8_t> a(10, 0), b(9000, 0), c(20, 0);
  Xfer x0{a.data(), a.size()}, x1{b.data(), b.size()}, x2{c.data(), c.size()};
  link.postRecv(&x0);
  link.postRecv(&x1);
  link.postRecv(&x2);
  auto put = [&](int stream, const void* p, size_t n) { ASSERT_EQ(write(sv[stream][1], p, n), ssize_t(n)); };
  tcp::WireHeader h1{tcp::kWireMagic, 1, 5000, 0};  // message 1 (stream 1 of 3): 5000 bytes, not 9000
  put(1, &h1, sizeof h1);
  for (int i = 0; i < 20; ++i) EXPECT_NO_THROW(link.progress()) << "failed before message 0 arrived";
  EXPECT_FALSE(x0.complete);
  tcp::WireHeader h0{tcp::kWireMagic, 0, 10, 0};
  std::vector<uint8_t> payload(10, 7);
  put(0, &h0, sizeof h0);
  put(0, payload.data(), payload.size());
  std::string what;
  for (int i = 0; i < 100 && what.empty(); ++i) {
    try {
      link.progress();
    } catch (const Error& e) {
      what = e.what();
      EXPECT_EQ(e.code(), collRemoteError);
    }
  }
  EXPECT_TRUE(x0.complete);
  EXPECT_EQ(a, payload);
  EXPECT_NE(what.find("size mismatch on message 1"), std::string::npos) << what;
  for (auto& p : sv) close(p[1]);
}

TEST(TcpErrors, PeerClosingMidTransferIsRemoteError) {
  const size_t big = 64u << 20;
  pair("2", "512K", [&](int rank, std::unique_ptr<Link>& link, Bootstrap& bs) {
    std::vector<uint8_t> buf(big, 7);
    Xfer x{buf.data(), big};
    if (rank == 1) {
      link->postSend(&x);
      for (int i = 0; i < 50; ++i) link->progress();  // part of it, then hang up
      EXPECT_FALSE(x.complete);
      link.reset();
      bs.barrier();
    } else {
      bs.barrier();
      link->postRecv(&x);
      std::string what = remoteErrorOf([&] { waitAll({link.get()}, {&x}, 10); });
      EXPECT_NE(what.find("peer rank 1 closed the connection"), std::string::npos) << what;
      EXPECT_LT(x.done, big);
    }
  });
}

TEST(TcpErrors, SendingToAClosedPeerIsRemoteError) {
  pair("1", "512K", [&](int rank, std::unique_ptr<Link>& link, Bootstrap& bs) {
    if (rank == 1) {
      link.reset();
      bs.barrier();
      return;
    }
    bs.barrier();
    std::vector<uint8_t> buf(16u << 20, 1);
    std::string what = remoteErrorOf([&] {
      for (int k = 0; k < 8; ++k) {  // the first sends may still fit the dead socket's buffer
        Xfer x{buf.data(), buf.size()};
        link->postSend(&x);
        waitAll({link.get()}, {&x}, 10);
      }
    });
    EXPECT_NE(what.find("peer rank 1 closed the connection"), std::string::npos) << what;
  });
}

TEST(TcpLinkApi, PostingNullBufferIsInvalidArgument) {
  pair("1", "4K", [&](int rank, std::unique_ptr<Link>& link, Bootstrap& bs) {
    Xfer x{nullptr, 5};
    try {
      link->postSend(&x);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), collInvalidArgument);
    }
    bs.barrier();
  });
}

TEST(TcpLinkApi, ProgressReportsMovementAndIdle) {
  pair("2", "4K", [&](int rank, std::unique_ptr<Link>& link, Bootstrap& bs) {
    EXPECT_FALSE(link->progress());  // nothing posted
    uint64_t v = 0x1122334455667788ull + rank, got = 0;
    Xfer s{&v, 8}, r{&got, 8};
    link->postRecv(&r);
    link->postSend(&s);
    waitAll({link.get()}, {&s, &r});
    EXPECT_EQ(got, 0x1122334455667788ull + (1 - rank));
    bs.barrier();
  });
}

}  // namespace
}  // namespace coll::tcptest
