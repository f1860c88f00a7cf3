#include <gtest/gtest.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "bootstrap/handshake.hpp"
#include "base/error.hpp"
#include "base/socket.hpp"
#include "test_util.hpp"
#include "base/sha256.hpp"

namespace coll {
namespace {

std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) { s += d[p[i] >> 4]; s += d[p[i] & 15]; }
  return s;
}

std::string sha(const std::string& m) {
  uint8_t out[32];
  sha256(m.data(), m.size(), out);
  return hex(out, 32);
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Lengths around the padding edge (55/56/64 bytes) and a multi-block message.
  EXPECT_EQ(sha(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha(std::string(64, 'b')), "a0fab1377f49a759b57f63318262ebe89fabfc990e8e93ceac2984561482b9d4");
  EXPECT_EQ(sha(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Address, ParseAndPrint) {
  EXPECT_EQ(addrToString(parseAddr("127.0.0.1:80")), "127.0.0.1:80");
  EXPECT_EQ(addrToString(parseAddr("[::1]:9000")), "[::1]:9000");
  EXPECT_EQ(addrPort(parseAddr("localhost:1234")), 1234);
  sockaddr_storage a = parseAddr("10.0.0.1:1");
  setAddrPort(&a, 65000);
  EXPECT_EQ(addrToString(a), "10.0.0.1:65000");
  EXPECT_EQ(addrLen(a), sizeof(sockaddr_in));
  EXPECT_EQ(addrLen(parseAddr("[::1]:1")), sizeof(sockaddr_in6));
}

TEST(Address, ParseRejectsMalformed) {
  for (const char* bad : {"", "nohost", "1.2.3.4", "1.2.3.4:", "1.2.3.4:70000", "1.2.3.4:-1", "::1:80",
                          "[::1]80", "[::1"}) {
    try {
      parseAddr(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), collInvalidArgument) << bad;
    }
  }
}

TEST(Interfaces, ExplicitLoopback) {
  sockaddr_storage a = chooseLocalAddr("lo");
  EXPECT_EQ(addrToString(a).rfind("127.", 0), 0u) << addrToString(a);
  EXPECT_EQ(addrPort(a), 0);
  sockaddr_storage b = chooseLocalAddr("=lo");
  EXPECT_EQ(addrToString(b), addrToString(a));
}

TEST(Interfaces, ExactMatchNeedsWholeName) {
  EXPECT_THROW(chooseLocalAddr("=l"), Error);  // "l" is only a prefix of "lo"
  EXPECT_NO_THROW(chooseLocalAddr("l"));
  EXPECT_THROW(chooseLocalAddr("nosuchif0"), Error);
}

TEST(Interfaces, ExcludeNeverPicksExcluded) {
  std::string lo = addrToString(chooseLocalAddr("lo"));
  try {
    EXPECT_NE(addrToString(chooseLocalAddr("^lo")), lo);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument);  // a host with nothing but loopback
  }
}

TEST(Interfaces, LoopbackRootGetsLoopback) {
  sockaddr_storage a = chooseLocalAddrFor(parseAddr("127.0.0.1:5000"), "");
  EXPECT_EQ(addrToString(a), "127.0.0.1:0");
  sockaddr_storage b = chooseLocalAddrFor(parseAddr("[::1]:5000"), "");
  EXPECT_EQ(addrToString(b), "[::1]:0");
}

TEST(Interfaces, RootOnOwnAddressGetsThatAddress) {
  sockaddr_storage mine = chooseLocalAddr("");
  if (addrToString(mine).rfind("127.", 0) == 0) GTEST_SKIP() << "no non-loopback interface";
  setAddrPort(&mine, 4000);
  sockaddr_storage a = chooseLocalAddrFor(mine, "");
  setAddrPort(&mine, 0);
  EXPECT_EQ(addrToString(a), addrToString(mine));
}

TEST(Connect, TimesOutNamingTheAddress) {
  sockaddr_storage a = test::loopback4(test::deadPort());
  auto t0 = std::chrono::steady_clock::now();
  try {
    connectWithRetry(a, Deadline(0.5));
    FAIL() << "connected to a dead port";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collTimeout);
    EXPECT_NE(std::string(e.what()).find(addrToString(a)), std::string::npos) << e.what();
  }
  double s = test::secondsSince(t0);
  EXPECT_GE(s, 0.45);
  EXPECT_LT(s, 2.0);
}

TEST(Connect, RetriesUntilTheListenerAppears) {
  int port = test::deadPort();
  std::thread late([port] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    sockaddr_storage a = test::loopback4(port);
    Socket l = listenOn(&a);
    Socket c(::accept(l.fd(), nullptr, nullptr));
    char b = 0;
    recvAll(c.fd(), &b, 1, Deadline(3));
    EXPECT_EQ(b, 'x');
  });
  Socket s = connectWithRetry(test::loopback4(port), Deadline(3));
  sendAll(s.fd(), "x", 1, Deadline(3));
  late.join();
}

// Out of file descriptors: the error names the limit and its value, which a job of many
// ranks (a socket per peer and stream) can pass where a small one did not.
TEST(Connect, OutOfDescriptorsNamesTheLimit) {
  const sockaddr_storage dead = test::loopback4(test::deadPort());
  int lowest = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(lowest, 0);
  ::close(lowest);
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest);  // the next socket would need one more
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::string what;
  collResult_t code = collSuccess;
  try {
    connectWithRetry(dead, Deadline(1));
  } catch (const Error& e) {
    what = e.what();
    code = e.code();
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(code, collSystemError) << what;
  EXPECT_NE(what.find("RLIMIT_NOFILE"), std::string::npos) << what;
  EXPECT_NE(what.find(strCat(" may have ", lowest, " open files")), std::string::npos) << what;
}

// The kernel's round-trip estimate: some microseconds over loopback once a reply came
// back, 0 for what is not a TCP socket.
TEST(Connect, MinRoundTripOfAConnection) {
  sockaddr_storage a = test::loopback4(0);
  Socket l = listenOn(&a);
  std::thread echo([&] {
    Socket c(::accept(l.fd(), nullptr, nullptr));
    char b[4];
    recvAll(c.fd(), b, 4, Deadline(3));
    sendAll(c.fd(), b, 4, Deadline(3));
  });
  Socket s = connectWithRetry(a, Deadline(3));
  char b[4] = {'p', 'i', 'n', 'g'};
  sendAll(s.fd(), b, 4, Deadline(3));
  recvAll(s.fd(), b, 4, Deadline(3));
  echo.join();
  const double rtt = tcpMinRttUs(s.fd());
  EXPECT_GT(rtt, 0);
  EXPECT_LT(rtt, 1e6);
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  EXPECT_EQ(tcpMinRttUs(fds[0]), 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(tcpMinRttUs(-1), 0);
}

TEST(Transfer, ClosedPeerIsRemoteErrorAndSilenceIsTimeout) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Socket a(sv[0]), b(sv[1]);
  char buf[8];
  try {
    recvAll(a.fd(), buf, 8, Deadline(0.2));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collTimeout);
  }
  sendAll(b.fd(), "abc", 3, Deadline(1));
  b.reset();
  try {
    recvAll(a.fd(), buf, 8, Deadline(1));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collRemoteError);
    EXPECT_NE(std::string(e.what()).find("3 of 8"), std::string::npos) << e.what();
  }
}

// Runs the server side on a thread; returns its verdict.
struct Pair {
  bool serverOk = false;
  std::string why;
  std::vector<uint8_t> hello;
  std::string clientError;
  collResult_t clientCode = collSuccess;
};

Pair handshake(const uint8_t* serverSecret, ConnRole serverRole, const uint8_t* clientSecret, ConnRole clientRole,
               const std::string& hello, const sockaddr_storage& where) {
  sockaddr_storage a = where;
  Socket l = listenOn(&a);
  Pair p;
  std::thread srv([&] {
    Socket c(::accept(l.fd(), nullptr, nullptr));
    p.serverOk = serverHandshake(c.fd(), serverSecret, serverRole, &p.hello, Deadline(3), &p.why);
  });
  try {
    Socket s = connectWithRetry(a, Deadline(3));
    clientHandshake(s.fd(), clientSecret, clientRole, hello.data(), hello.size(), Deadline(3));
  } catch (const Error& e) {
    p.clientCode = e.code();
    p.clientError = e.what();
  }
  srv.join();
  return p;
}

struct Secrets {
  uint8_t good[32], other[32];
  Secrets() {
    for (int i = 0; i < 32; ++i) { good[i] = static_cast<uint8_t>(i); other[i] = static_cast<uint8_t>(i); }
    other[31] ^= 1;  // one bit differs
  }
};

TEST(Handshake, SucceedsAndDeliversHello) {
  Secrets s;
  Pair p = handshake(s.good, ConnRole::Tcp, s.good, ConnRole::Tcp, "hello there", test::loopback4());
  EXPECT_TRUE(p.serverOk) << p.why;
  EXPECT_EQ(p.clientCode, collSuccess) << p.clientError;
  EXPECT_EQ(std::string(p.hello.begin(), p.hello.end()), "hello there");
}

TEST(Handshake, WorksOverIPv6) {
  sockaddr_storage a = parseAddr("[::1]:0");
  int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  bool ok = probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&a), addrLen(a)) == 0;
  if (probe >= 0) ::close(probe);
  if (!ok) GTEST_SKIP() << "no IPv6 loopback";
  Secrets s;
  Pair p = handshake(s.good, ConnRole::Bootstrap, s.good, ConnRole::Bootstrap, "", a);
  EXPECT_TRUE(p.serverOk) << p.why;
  EXPECT_EQ(p.clientCode, collSuccess) << p.clientError;
  EXPECT_TRUE(p.hello.empty());
}

TEST(Handshake, WrongSecretFailsBothSides) {
  Secrets s;
  Pair p = handshake(s.good, ConnRole::Tcp, s.other, ConnRole::Tcp, "x", test::loopback4());
  EXPECT_FALSE(p.serverOk);
  EXPECT_NE(p.why.find("secret"), std::string::npos) << p.why;
  EXPECT_EQ(p.clientCode, collRemoteError) << p.clientError;
  EXPECT_TRUE(p.hello.empty());
}

TEST(Handshake, WrongRoleIsRejected) {
  Secrets s;
  Pair p = handshake(s.good, ConnRole::Bootstrap, s.good, ConnRole::Tcp, "x", test::loopback4());
  EXPECT_FALSE(p.serverOk);
  EXPECT_NE(p.why.find("role"), std::string::npos) << p.why;
  EXPECT_EQ(p.clientCode, collRemoteError);
}

TEST(Handshake, ClientRefusesOversizeHello) {
  Secrets s;
  std::string big(kMaxHello + 1, 'h');
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Socket a(sv[0]), b(sv[1]);
  EXPECT_THROW(clientHandshake(a.fd(), s.good, ConnRole::Tcp, big.data(), big.size(), Deadline(1)), Error);
}

TEST(Handshake, ServerBoundsHelloLengthBeforeReading) {
  // A client with the right secret claiming a 1 GiB hello is dropped without allocating it.
  Secrets s;
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Socket srv(sv[0]), cli(sv[1]);
  std::thread client([&] {
    uint8_t ch[hs::kChallengeBytes], hdr[hs::kClientHeaderBytes] = {};
    recvAll(cli.fd(), ch, sizeof(ch), Deadline(3));
    hs::putU32(hdr, hs::kHsMagic);
    hs::putU32(hdr + 4, hs::kHsVersion);
    hs::putU32(hdr + 8, static_cast<uint32_t>(ConnRole::Tcp));
    hs::clientMac(s.good, ConnRole::Tcp, ch + 8, hdr + 12, hdr + 12 + hs::kNonceBytes);
    hs::putU32(hdr + 12 + hs::kNonceBytes + hs::kMacBytes, 1u << 30);
    sendAll(cli.fd(), hdr, sizeof(hdr), Deadline(3));
  });
  std::vector<uint8_t> hello;
  std::string why;
  EXPECT_FALSE(serverHandshake(srv.fd(), s.good, ConnRole::Tcp, &hello, Deadline(3), &why));
  EXPECT_NE(why.find("exceeds"), std::string::npos) << why;
  client.join();
}

TEST(Handshake, SilentClientTimesOut) {
  Secrets s;
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Socket srv(sv[0]), cli(sv[1]);
  std::vector<uint8_t> hello;
  std::string why;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(serverHandshake(srv.fd(), s.good, ConnRole::Tcp, &hello, Deadline(0.3), &why));
  EXPECT_LT(test::secondsSince(t0), 2.0);
  EXPECT_NE(why.find("timed out"), std::string::npos) << why;
}

}  // namespace
}  // namespace coll
