// Strangers and broken clients connecting to a root while a job forms: each is dropped,
// none delays or joins the job.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/handshake.hpp"
#include "base/error.hpp"
#include "test_util.hpp"

namespace coll {
namespace {

// Connects and returns the socket with the server's challenge already read.
Socket connectAndReadChallenge(const UniqueIdData& id, uint8_t* challenge) {
  Socket s = connectWithRetry(id.root, Deadline(2));
  recvAll(s.fd(), challenge, hs::kChallengeBytes, Deadline(2));
  return s;
}

// A well-formed client header, optionally with a wrong secret or an oversize hello.
std::vector<uint8_t> clientHeader(const uint8_t* secret, const uint8_t* challenge, uint32_t magic,
                                  uint32_t helloLen) {
  std::vector<uint8_t> h(hs::kClientHeaderBytes);
  hs::putU32(h.data(), magic);
  hs::putU32(h.data() + 4, hs::kHsVersion);
  hs::putU32(h.data() + 8, static_cast<uint32_t>(ConnRole::Bootstrap));
  hs::randomNonce(h.data() + 12);
  hs::clientMac(secret, ConnRole::Bootstrap, challenge + 8, h.data() + 12, h.data() + 12 + hs::kNonceBytes);
  hs::putU32(h.data() + 12 + hs::kNonceBytes + hs::kMacBytes, helloLen);
  return h;
}

// True when the root closes the connection (EOF or reset) within `seconds`.
bool closedByPeer(int fd, double seconds) {
  Deadline dl(seconds);
  char buf[256];
  while (!dl.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, dl.remainingMs()) <= 0) continue;
    ssize_t k = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

class HostileClients : public ::testing::Test {
 protected:
  void SetUp() override { setenv("COLL_BOOTSTRAP_HANDSHAKE_TIMEOUT", "0.5", 1); }
  void TearDown() override { unsetenv("COLL_BOOTSTRAP_HANDSHAKE_TIMEOUT"); }
};

TEST_F(HostileClients, JobFormsAndEveryStrangerIsDropped) {
  const int n = 3;
  UniqueIdData id = test::startJob(n, 3.0);
  uint8_t wrongSecret[kSecretBytes];
  memcpy(wrongSecret, id.secret, kSecretBytes);
  wrongSecret[5] ^= 0x10;

  std::vector<std::pair<std::string, Socket>> strangers;
  {  // garbage bytes instead of a handshake
    Socket s = connectWithRetry(id.root, Deadline(2));
    std::vector<uint8_t> junk(300);
    for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<uint8_t>(i * 37 + 11);
    sendAll(s.fd(), junk.data(), junk.size(), Deadline(2));
    strangers.emplace_back("garbage", std::move(s));
  }
  uint8_t ch[hs::kChallengeBytes];
  {
    Socket s = connectAndReadChallenge(id, ch);
    auto h = clientHeader(id.secret, ch, 0xdeadbeef, 0);
    sendAll(s.fd(), h.data(), h.size(), Deadline(2));
    strangers.emplace_back("wrong magic", std::move(s));
  }
  {
    Socket s = connectAndReadChallenge(id, ch);
    auto h = clientHeader(wrongSecret, ch, hs::kHsMagic, 8);
    sendAll(s.fd(), h.data(), h.size(), Deadline(2));
    strangers.emplace_back("bad MAC", std::move(s));
  }
  {
    Socket s = connectAndReadChallenge(id, ch);
    auto h = clientHeader(id.secret, ch, hs::kHsMagic, 0x7fffffff);
    sendAll(s.fd(), h.data(), h.size(), Deadline(2));
    strangers.emplace_back("oversize hello length", std::move(s));
  }
  {  // right secret, but the hello is not a rank's hello
    Socket s = connectAndReadChallenge(id, ch);
    auto h = clientHeader(id.secret, ch, hs::kHsMagic, 5);
    h.insert(h.end(), {1, 2, 3, 4, 5});
    sendAll(s.fd(), h.data(), h.size(), Deadline(2));
    strangers.emplace_back("malformed hello", std::move(s));
  }
  {
    Socket s = connectAndReadChallenge(id, ch);
    auto h = clientHeader(id.secret, ch, hs::kHsMagic, 0);
    sendAll(s.fd(), h.data(), 20, Deadline(2));  // a third of a header, then silence
    strangers.emplace_back("half header", std::move(s));
  }
  strangers.emplace_back("silent", connectWithRetry(id.root, Deadline(2)));

  auto t0 = std::chrono::steady_clock::now();
  auto out = test::runRanks(n, [&](int r) {
    auto b = Bootstrap::connect(id, r, n, 3.0);
    EXPECT_EQ(static_cast<int>(b->peers().size()), n);
    int v = r + 40;
    auto all = b->allGather(&v, sizeof(v));
    for (int q = 0; q < n; ++q) EXPECT_EQ(reinterpret_cast<const int*>(all.data())[q], q + 40);
    b->barrier();
    std::string why;
    EXPECT_FALSE(b->failureReported(&why)) << why;
    b->close();
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[r].code, collSuccess) << out[r].what;
  EXPECT_LT(test::secondsSince(t0), 2.0);
  for (auto& [what, s] : strangers) EXPECT_TRUE(closedByPeer(s.fd(), 2.0)) << what << " was not dropped";
}

TEST_F(HostileClients, SilentConnectionIsDroppedAfterTheHandshakeTimeout) {
  UniqueIdData id = test::startJob(1, 3.0);
  Socket silent = connectWithRetry(id.root, Deadline(2));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(closedByPeer(silent.fd(), 2.0));
  double s = test::secondsSince(t0);
  EXPECT_GE(s, 0.4);  // COLL_BOOTSTRAP_HANDSHAKE_TIMEOUT=0.5
  EXPECT_LT(s, 1.5);
  auto b = Bootstrap::connect(id, 0, 1, 3.0);  // the root is still serving
  b->barrier();
  b->close();
}

TEST_F(HostileClients, NobodyGetsInAfterTheJobFormed) {
  UniqueIdData id = test::startJob(1, 3.0);
  auto b = Bootstrap::connect(id, 0, 1, 3.0);
  try {
    connectWithRetry(id.root, Deadline(0.3));
    ADD_FAILURE() << "the root still listens after the job formed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collTimeout);
  }
  b->barrier();
  b->close();
}

TEST_F(HostileClients, FloodOfSilentConnectionsDoesNotBlockTheJob) {
  UniqueIdData id = test::startJob(2, 3.0);
  std::vector<Socket> flood;
  for (int i = 0; i < 40; ++i) flood.push_back(connectWithRetry(id.root, Deadline(2)));
  auto t0 = std::chrono::steady_clock::now();
  auto out = test::runRanks(2, [&](int r) {
    auto b = Bootstrap::connect(id, r, 2, 3.0);
    b->barrier();
    b->close();
  });
  for (auto& o : out) EXPECT_EQ(o.code, collSuccess) << o.what;
  EXPECT_LT(test::secondsSince(t0), 1.0);
}

// Lets this process hold `n` more descriptors (the soft limit may be 1024).
void roomForDescriptors(rlim_t n) {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < n) rl.rlim_cur = std::min(n, rl.rlim_max);
  setrlimit(RLIMIT_NOFILE, &rl);
}

// Hundreds of strangers hold sockets mid-handshake (silent, or a few bytes of garbage
// short of a header) before the ranks come, and more keep arriving while they join: far
// more than the root keeps unproven. The root drops the oldest, not the newcomers, and a
// rank dropped so connects again: the job forms.
TEST_F(HostileClients, HundredsOfUnprovenConnectionsDoNotKeepRanksOut) {
  setenv("COLL_BOOTSTRAP_HANDSHAKE_TIMEOUT", "60", 1);  // the strangers stay as long as they like
  roomForDescriptors(4096);
  const int n = 4;
  UniqueIdData id = test::startJob(n, 20.0);
  std::vector<Socket> flood;
  const uint8_t junk[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto stranger = [&](int i) {
    Socket s = connectWithRetry(id.root, Deadline(5));
    if (i % 2) sendAll(s.fd(), junk, sizeof(junk), Deadline(1));
    return s;
  };
  for (int i = 0; i < 400; ++i) flood.push_back(stranger(i));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the root has them all
  std::atomic<bool> stop{false};
  std::vector<Socket> more;
  std::thread late([&] {
    try {
      for (int i = 0; i < 300 && !stop; ++i) more.push_back(stranger(i));
    } catch (const Error&) {  // the job formed: the root no longer listens
    }
  });
  auto out = test::runRanks(n, [&](int r) {
    auto b = Bootstrap::connect(id, r, n, 15.0);
    int v = 10 + r;
    auto all = b->allGather(&v, sizeof(v));
    for (int k = 0; k < n; ++k) EXPECT_EQ(reinterpret_cast<const int*>(all.data())[k], 10 + k);
    b->close();
  });
  stop = true;
  late.join();
  for (auto& o : out) EXPECT_EQ(o.code, collSuccess) << o.what;
}

}  // namespace
}  // namespace coll
