// Ranks as threads against a real root on loopback.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/protocol.hpp"
#include "comm/comm.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "test_util.hpp"
#include "bootstrap/handshake.hpp"

namespace coll {
namespace {

using test::runRanks;

// Contribution of `rank` in round `round`: size and bytes both depend on the round.
std::vector<uint8_t> blob(int rank, int round) {
  std::vector<uint8_t> b(static_cast<size_t>(round) * 13 + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(rank * 31 + round * 7 + i);
  return b;
}

class RendezvousN : public ::testing::TestWithParam<int> {};

TEST_P(RendezvousN, AllGathersAndBarriers) {
  const int n = GetParam();
  UniqueIdData id = test::startJob(n, 3.0);
  auto out = runRanks(n, [&](int r) {
    auto b = Bootstrap::connect(id, r, n, 3.0);
    ASSERT_EQ(b->rank(), r);
    ASSERT_EQ(b->nranks(), n);
    ASSERT_EQ(static_cast<int>(b->peers().size()), n);
    for (const auto& p : b->peers()) {
      EXPECT_EQ(p.pid, static_cast<int>(getpid()));
      EXPECT_EQ(p.hostId, localHostId());
    }
    for (int round = 0; round < 4; ++round) {
      std::vector<uint8_t> mine = blob(r, round);
      std::vector<uint8_t> all = b->allGather(mine.data(), mine.size());
      ASSERT_EQ(all.size(), mine.size() * n);
      for (int q = 0; q < n; ++q) {
        std::vector<uint8_t> want = blob(q, round);
        ASSERT_EQ(0, memcmp(all.data() + q * want.size(), want.data(), want.size())) << "round " << round << " rank " << q;
      }
      b->barrier();
    }
    std::string why;
    EXPECT_FALSE(b->failureReported(&why)) << why;
    b->close();
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[r].code, collSuccess) << "rank " << r << ": " << out[r].what;
}

INSTANTIATE_TEST_SUITE_P(Ranks, RendezvousN, ::testing::Values(1, 2, 5));

TEST(Rendezvous, BarrierReallyWaitsForEveryone) {
  UniqueIdData id = test::startJob(3, 3.0);
  std::atomic<int> arrived{0};
  std::atomic<bool> earlyExit{false};
  auto out = runRanks(3, [&](int r) {
    auto b = Bootstrap::connect(id, r, 3, 3.0);
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    arrived++;
    b->barrier();
    if (arrived.load() != 3) earlyExit = true;
    b->close();
  });
  for (auto& o : out) EXPECT_EQ(o.code, collSuccess) << o.what;
  EXPECT_FALSE(earlyExit.load());
}

TEST(Rendezvous, RootLearnsSizeFromFirstRank) {
  UniqueIdData id = test::startJob(0, 3.0);  // like collGetUniqueId: size not known yet
  auto out = runRanks(3, [&](int r) {
    auto b = Bootstrap::connect(id, r, 3, 3.0);
    int v = r * 100;
    auto all = b->allGather(&v, sizeof(v));
    const int* got = reinterpret_cast<const int*>(all.data());
    EXPECT_EQ(got[0] + got[1] + got[2], 300);
    b->close();
  });
  for (auto& o : out) EXPECT_EQ(o.code, collSuccess) << o.what;
}

TEST(Rendezvous, SizeMismatchNamesBothSizes) {
  UniqueIdData id = test::startJob(2, 3.0);
  auto out = runRanks(2, [&](int r) {
    auto b = Bootstrap::connect(id, r, 2, 3.0);
    std::vector<uint8_t> mine(r == 0 ? 4 : 8, 1);
    try {
      b->allGather(mine.data(), mine.size());
    } catch (...) {
      b->close();
      throw;
    }
  });
  for (auto& o : out) {
    EXPECT_EQ(o.code, collInvalidUsage) << o.what;
    EXPECT_NE(o.what.find("4 bytes"), std::string::npos) << o.what;
    EXPECT_NE(o.what.find("8 bytes"), std::string::npos) << o.what;
  }
}

TEST(Rendezvous, DuplicateRankAndWrongSizeAreRejectedJobStillForms) {
  UniqueIdData id = test::startJob(2, 3.0);
  auto first = Bootstrap::connect;  // rank 0 joins in a thread, then the impostors, then rank 1
  std::atomic<bool> rank0In{false};
  std::thread r0([&] {
    auto b = first(id, 0, 2, 3.0, nullptr, localHostId());
    rank0In = true;
    int v = 7;
    auto all = b->allGather(&v, sizeof(v));
    EXPECT_EQ(reinterpret_cast<const int*>(all.data())[1], 8);
    b->close();
  });
  // rank0 cannot return from connect before rank 1 joins, so give its hello time to land.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  try {
    Bootstrap::connect(id, 0, 2, 1.0);
    ADD_FAILURE() << "a duplicate rank 0 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collInvalidUsage) << e.what();
    EXPECT_NE(std::string(e.what()).find("duplicate"), std::string::npos) << e.what();
  }
  try {
    Bootstrap::connect(id, 1, 3, 1.0);
    ADD_FAILURE() << "a rank with nranks 3 joined a job of 2";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collInvalidUsage) << e.what();
    EXPECT_NE(std::string(e.what()).find("nranks"), std::string::npos) << e.what();
  }
  auto b1 = Bootstrap::connect(id, 1, 2, 3.0);
  int v = 8;
  auto all = b1->allGather(&v, sizeof(v));
  EXPECT_EQ(reinterpret_cast<const int*>(all.data())[0], 7);
  b1->close();
  r0.join();
  EXPECT_TRUE(rank0In.load());
}

TEST(Rendezvous, WrongSecretCannotJoin) {
  UniqueIdData id = test::startJob(1, 3.0);
  UniqueIdData bad = id;
  bad.secret[0] ^= 0xff;
  try {
    Bootstrap::connect(bad, 0, 1, 1.0);
    FAIL() << "joined with the wrong secret";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collRemoteError) << e.what();
  }
  auto b = Bootstrap::connect(id, 0, 1, 3.0);  // the real rank still gets in
  b->close();
}

TEST(Rendezvous, RootNeverUpTimesOutNamingTheRoot) {
  UniqueIdData id;
  randomSecret(id.secret, kSecretBytes);
  id.root = test::loopback4(test::deadPort());
  auto t0 = std::chrono::steady_clock::now();
  try {
    Bootstrap::connect(id, 0, 2, 1.0);
    FAIL() << "connected to nobody";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collTimeout) << e.what();
    EXPECT_NE(std::string(e.what()).find(addrToString(id.root)), std::string::npos) << e.what();
  }
  double s = test::secondsSince(t0);
  EXPECT_GE(s, 0.9);
  EXPECT_LT(s, 2.5);
}

TEST(Rendezvous, RootStartingLateIsWaitedFor) {
  UniqueIdData id;
  randomSecret(id.secret, kSecretBytes);
  int port = test::deadPort();
  id.root = test::loopback4(port);
  std::thread launcherRank0([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    RendezvousRoot::start(test::loopback4(port), 2, id.secret, 3.0);
  });
  auto out = runRanks(2, [&](int r) {
    auto b = Bootstrap::connect(id, r, 2, 3.0);
    b->barrier();
    b->close();
  });
  launcherRank0.join();
  for (auto& o : out) EXPECT_EQ(o.code, collSuccess) << o.what;
}

TEST(Rendezvous, MissingRankTimesOutAtRootAndRanks) {
  UniqueIdData id = test::startJob(3, 1.0);
  auto t0 = std::chrono::steady_clock::now();
  auto out = runRanks(2, [&](int r) { Bootstrap::connect(id, r, 3, 3.0); });
  for (auto& o : out) {
    EXPECT_EQ(o.code, collTimeout) << o.what;
    EXPECT_NE(o.what.find("only 2 of 3"), std::string::npos) << o.what;
    EXPECT_NE(o.what.find("missing ranks: 2"), std::string::npos) << o.what;
  }
  EXPECT_LT(test::secondsSince(t0), 2.5);
}

// The ranks' own deadlines pass before the root's: the rank whose timer fires names the
// ranks that never joined, as the root would.
TEST(Rendezvous, RankTimingOutFirstNamesTheRanksThatNeverJoined) {
  UniqueIdData id = test::startJob(5, 10.0);
  auto out = runRanks(5, [&](int r) {
    if (r == 1 || r == 3) return;  // never join
    Bootstrap::connect(id, r, 5, 1.0);
  });
  // The first to time out names them; it leaving is news to the others, whose notice
  // names them too.
  int timedOut = 0;
  for (int r : {0, 2, 4}) {
    if (out[r].code == collTimeout) {
      ++timedOut;
      EXPECT_NE(out[r].what.find("missing ranks: 1, 3"), std::string::npos) << out[r].what;
    } else {
      EXPECT_EQ(out[r].code, collRemoteError) << out[r].what;
      EXPECT_NE(out[r].what.find("waiting for rank 1, rank 3 to join"), std::string::npos) << out[r].what;
    }
  }
  EXPECT_GE(timedOut, 1);
}

int openFiles(pid_t pid) {
  DIR* d = opendir(strCat("/proc/", pid, "/fd").c_str());
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// A process forks while another of its threads is writing a message (a root reporting a
// departed rank): the child must be able to log, not wait forever for a lock that no
// thread of its own holds. Each child logs once and exits; one stuck for 5 s fails.
TEST(Fork, ChildOfALoggingProcessCanLog) {
  int saved = dup(2);
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(saved, 0);
  ASSERT_GE(devnull, 0);
  dup2(devnull, 2);
  std::atomic<bool> stop{false};
  std::thread chatter([&] {
    while (!stop.load()) COLL_WARN("a message written while the process forks");
  });
  int stuck = 0;
  for (int i = 0; i < 100 && !stuck; ++i) {
    pid_t child = fork();
    if (child == 0) {
      COLL_WARN("a message from the child");
      _exit(0);
    }
    ASSERT_GT(child, 0);
    int status = 0;
    pid_t done = 0;
    for (int ms = 0; ms < 5000 && (done = waitpid(child, &status, WNOHANG)) == 0; ++ms)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (done == 0) {
      ++stuck;
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
    }
  }
  stop = true;
  chatter.join();
  dup2(saved, 2);
  ::close(saved);
  ::close(devnull);
  EXPECT_EQ(stuck, 0) << "a forked child never finished its one message";
}

// The root's process runs out of descriptors after the first rank joined: that rank gets
// the reason at once instead of a timeout. (The rank the root could not accept fails too,
// reset or refused: refused, it retries until its own timeout, as for any root that is gone.)
TEST(Rendezvous, RootOutOfDescriptorsEndsTheFormation) {
  UniqueIdData id;
  randomSecret(id.secret, kSecretBytes);
  sockaddr_storage addr = test::loopback4(test::deadPort());
  id.root = addr;
  pid_t root = fork();
  if (root == 0) {
    RendezvousRoot::start(addr, 2, id.secret, 5.0);
    int lowest = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ::close(lowest);
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = static_cast<rlim_t>(lowest) + 1;  // room for the first rank's connection only
    setrlimit(RLIMIT_NOFILE, &rl);
    pause();
    _exit(0);
  }
  ASSERT_GT(root, 0);
  int before = -1;
  for (int i = 0; i < 500 && before != openFiles(root); ++i) {  // until the listener is up
    before = openFiles(root);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  test::RankOutcome first, second;
  std::thread t([&] { first = test::runRanks(1, [&](int) { Bootstrap::connect(id, 0, 2, 10.0); })[0]; });
  for (int i = 0; i < 500 && openFiles(root) == before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Its handshake, over loopback (ample even on a loaded machine; a rank still mid-handshake
  // when the root runs out of descriptors is dropped, not told).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  second = test::runRanks(1, [&](int) { Bootstrap::connect(id, 1, 2, 2.0); })[0];
  t.join();
  kill(root, SIGKILL);
  waitpid(root, nullptr, 0);
  EXPECT_EQ(first.code, collSystemError) << first.what;
  EXPECT_NE(first.what.find("cannot accept"), std::string::npos) << first.what;
  EXPECT_NE(first.what.find("RLIMIT_NOFILE"), std::string::npos) << first.what;
  EXPECT_NE(second.code, collSuccess);
}

// Rank 2 never joins (its host unreachable, or the process frozen). Rank 0 gives up first
// and leaves; the notice rank 1 gets must name rank 2, not only rank 0, which did nothing
// wrong.
TEST(Rendezvous, RankGivingUpWhileFormingNoticeNamesTheMissingRank) {
  UniqueIdData id = test::startJob(3, 10.0);
  auto out = runRanks(2, [&](int r) { Bootstrap::connect(id, r, 3, r == 0 ? 0.5 : 5.0); });
  EXPECT_EQ(out[0].code, collTimeout) << out[0].what;
  EXPECT_EQ(out[1].code, collRemoteError) << out[1].what;
  EXPECT_NE(out[1].what.find("rank 0"), std::string::npos) << out[1].what;
  EXPECT_NE(out[1].what.find("waiting for rank 2 to join"), std::string::npos) << out[1].what;
}

// The same in a round of the formed job: rank 2 joined but never contributes.
TEST(Rendezvous, RankGivingUpInARoundNoticeNamesTheSilentRank) {
  UniqueIdData id = test::startJob(3, 10.0);
  auto out = runRanks(3, [&](int r) {
    auto b = Bootstrap::connect(id, r, 3, r == 0 ? 1.0 : 5.0);
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      b->close();
      return;
    }
    int v = r;
    b->allGather(&v, sizeof(v));
  });
  EXPECT_EQ(out[0].code, collTimeout) << out[0].what;
  EXPECT_EQ(out[1].code, collRemoteError) << out[1].what;
  EXPECT_NE(out[1].what.find("rank 0"), std::string::npos) << out[1].what;
  EXPECT_NE(out[1].what.find("waiting for rank 2 (host"), std::string::npos) << out[1].what;
  EXPECT_EQ(out[1].what.find("rank 1 (host"), std::string::npos) << out[1].what;
  EXPECT_EQ(out[2].code, collSuccess) << out[2].what;
}

// collCommSplit forms the new communicator with the parent's abort flag as `cancel`: a
// member that never comes (frozen, its host cut off) must not keep the thread in the
// split for COLL_TIMEOUT after the parent was aborted, whether the member never joins
// (the wait for the rendezvous) or joins and then stays silent (the first round).
TEST(Rendezvous, CancelEndsTheWaitsOfACommunicatorForming) {
  // Without the cancel, the waits would last this long (instead of the default 300 s).
  struct Timeout {
    const char* was = getenv("COLL_TIMEOUT");
    std::string old = was ? was : "";
    Timeout() { setenv("COLL_TIMEOUT", "10", 1); }
    ~Timeout() { was ? setenv("COLL_TIMEOUT", old.c_str(), 1) : unsetenv("COLL_TIMEOUT"); }
  } timeout;
  for (bool joins : {false, true}) {
    SCOPED_TRACE(joins ? "rank 1 joins, then stays silent" : "rank 1 never joins");
    UniqueIdData id = test::startJob(2, 20.0);
    std::atomic<bool> cancel{false};
    std::unique_ptr<Bootstrap> silent;
    std::thread other([&] {
      if (joins) silent = Bootstrap::connect(id, 1, 2, 20.0);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      cancel = true;
    });
    auto t0 = std::chrono::steady_clock::now();
    try {
      Comm::create(id, 0, 2, &cancel);
      ADD_FAILURE() << "formed without rank 1";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), collRemoteError) << e.what();
      EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
    }
    EXPECT_LT(test::secondsSince(t0), 2.0);
    other.join();
    if (silent) silent->close();
  }
}

TEST(Rendezvous, SilentRankMakesAllGatherTimeOut) {
  UniqueIdData id = test::startJob(2, 3.0);
  auto out = runRanks(2, [&](int r) {
    auto b = Bootstrap::connect(id, r, 2, 0.5);
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(900));
      b->close();
      return;
    }
    int v = 1;
    auto t0 = std::chrono::steady_clock::now();
    try {
      b->allGather(&v, sizeof(v));
    } catch (const Error&) {
      EXPECT_LT(test::secondsSince(t0), 1.5);
      throw;
    }
  });
  EXPECT_EQ(out[0].code, collTimeout) << out[0].what;
  EXPECT_EQ(out[1].code, collSuccess) << out[1].what;
}

TEST(Rendezvous, RankDroppingWithoutGoodbyeIsReported) {
  UniqueIdData id = test::startJob(3, 3.0);
  auto out = runRanks(3, [&](int r) {
    auto b = Bootstrap::connect(id, r, 3, 3.0);
    int v = r;
    b->allGather(&v, sizeof(v));
    if (r == 2) return;  // destroyed without close(): a crash as far as the others know
    try {
      b->allGather(&v, sizeof(v));
    } catch (const Error& e) {
      std::string why;
      EXPECT_TRUE(b->failureReported(&why));
      EXPECT_NE(why.find("rank 2"), std::string::npos) << why;
      EXPECT_NE(why.find("disconnected"), std::string::npos) << why;
      EXPECT_NE(why.find(std::to_string(getpid())), std::string::npos) << why;
      b->close();
      throw;
    }
  });
  EXPECT_EQ(out[2].code, collSuccess);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].code, collRemoteError) << out[r].what;
    EXPECT_NE(out[r].what.find("rank 2"), std::string::npos) << out[r].what;
  }
}

// A rank dies while the job forms, and the ranks that had joined leave on the failure
// notice: a rank that comes after them must get the notice too, at once, instead of
// retrying for its whole timeout against a rendezvous that stopped listening.
TEST(Rendezvous, RankJoiningAfterAFailureWhileFormingGetsTheNotice) {
  UniqueIdData id = test::startJob(3, 10.0);
  test::RankOutcome first;
  std::thread rank0([&] {
    try {
      Bootstrap::connect(id, 0, 3, 5.0);
    } catch (const Error& e) {
      first = {e.code(), e.what()};
    }
  });
  {
    // Rank 1 joins, then drops without a goodbye (a crash) while rank 0 waits for rank 2.
    Socket s = connectWithRetry(id.root, Deadline(2));
    std::vector<uint8_t> hello = bs::encodeHello({1, 3, PeerInfo{localHostId(), "h", 1}});
    clientHandshake(s.fd(), id.secret, ConnRole::Bootstrap, hello.data(), hello.size(), Deadline(2));
  }
  rank0.join();  // failed on the notice; its connection is closed
  EXPECT_EQ(first.code, collRemoteError) << first.what;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the root has seen rank 0 go
  auto t0 = std::chrono::steady_clock::now();
  try {
    Bootstrap::connect(id, 2, 3, 5.0);
    ADD_FAILURE() << "joined a job that failed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), collRemoteError) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
  EXPECT_LT(test::secondsSince(t0), 1.0) << "the root should have answered with the failure";
}

TEST(Rendezvous, AbortNoticeReachesEveryone) {
  UniqueIdData id = test::startJob(3, 3.0);
  auto out = runRanks(3, [&](int r) {
    auto b = Bootstrap::connect(id, r, 3, 3.0);
    b->barrier();
    if (r == 1) {
      b->abort("out of device memory");
      return;
    }
    // Poll like a wait loop would.
    Deadline dl(3.0);
    std::string why;
    while (!b->failureReported(&why) && !dl.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
    EXPECT_NE(why.find("out of device memory"), std::string::npos) << why;
    int v = 0;
    EXPECT_THROW(b->allGather(&v, sizeof(v)), Error);
    b->close();
  });
  for (auto& o : out) EXPECT_EQ(o.code, collSuccess) << o.what;
}

TEST(Rendezvous, EarlyGoodbyeFailsTheRoundInsteadOfHanging) {
  UniqueIdData id = test::startJob(2, 3.0);
  auto out = runRanks(2, [&](int r) {
    auto b = Bootstrap::connect(id, r, 2, 3.0);
    if (r == 1) {
      b->close();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto t0 = std::chrono::steady_clock::now();
    try {
      b->barrier();
    } catch (const Error&) {
      EXPECT_LT(test::secondsSince(t0), 1.0);
      throw;
    }
  });
  EXPECT_EQ(out[0].code, collRemoteError) << out[0].what;
  EXPECT_NE(out[0].what.find("rank 1 closed"), std::string::npos) << out[0].what;
}

TEST(Rendezvous, UseAfterCloseIsAnError) {
  UniqueIdData id = test::startJob(1, 3.0);
  auto b = Bootstrap::connect(id, 0, 1, 3.0);
  b->close();
  EXPECT_THROW(b->barrier(), Error);
  std::string why;
  EXPECT_FALSE(b->failureReported(&why));
  b->close();  // idempotent
}

TEST(Rendezvous, BadArguments) {
  UniqueIdData id = test::startJob(1, 1.0);
  EXPECT_THROW(Bootstrap::connect(id, 1, 1, 1.0), Error);
  EXPECT_THROW(Bootstrap::connect(id, -1, 1, 1.0), Error);
  EXPECT_THROW(Bootstrap::connect(id, 0, 0, 1.0), Error);
  auto b = Bootstrap::connect(id, 0, 1, 3.0);
  EXPECT_THROW(b->allGather(nullptr, 4), Error);
  b->close();
}

}  // namespace
}  // namespace coll
