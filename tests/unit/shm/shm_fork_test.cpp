// The shm transport between two real processes (fork): the process_vm_readv path, a
// peer killed with SIGKILL, a peer dying in the middle of connect, and /dev/shm clean
// afterwards in every case.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <functional>
#include <optional>
#include <thread>

#include "shm_fork_util.hpp"
#include "shm_test_util.hpp"
#include "base/shared_mem.hpp"
#include "transport/shm/shm_link.hpp"
#include "transport/shm/shm_segment.hpp"

namespace coll::shmtest {
namespace {

// Both directions at once, every size posted as one window; returns wrong messages.
// Two sends in three also copy their data into a mirror (push records where the sender
// may write the receiver), so pushed, pulled and cooperative records share the window;
// half of those mirrors are cold (Xfer::cold), copied with streaming stores.
// sharedBuffers: every buffer is collMemAlloc memory, which the peer maps.
int exchange(Link* link, int me, const std::vector<size_t>& sizes, bool sharedBuffers = false) {
  int peer = 1 - me;
  std::vector<std::vector<uint8_t>> out(sizes.size()), in(sizes.size()), mirror(sizes.size());
  std::vector<size_t> padded;
  for (size_t n : sizes) padded.push_back(n + 64);
  std::optional<SharedWindow> sOut, sIn, sMirror;
  if (sharedBuffers) sOut.emplace(padded), sIn.emplace(padded), sMirror.emplace(padded);
  std::vector<Xfer> sx(sizes.size()), rx(sizes.size());
  std::vector<Xfer*> all;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].resize(sizes[i]);
    fillPattern(out[i], me, peer, static_cast<int>(i));
    in[i].assign(sizes[i], 0);
    mirror[i].assign(sizes[i], 0);
    uint8_t* o = sharedBuffers ? sOut->at(i) : out[i].data();
    uint8_t* r = sharedBuffers ? sIn->at(i) : in[i].data();
    uint8_t* m = sharedBuffers ? sMirror->at(i) : mirror[i].data();
    if (sharedBuffers && sizes[i] != 0) std::memcpy(o, out[i].data(), sizes[i]);
    sx[i] = Xfer{o, sizes[i]};
    if (i % 3 != 0) {
      sx[i].hints.mirror = m;
      sx[i].hints.cold = i % 2 == 1;  // the mirror copy then goes with streaming stores
    }
    rx[i] = Xfer{r, sizes[i]};
    rx[i].hints.assist = i % 2 == 0;  // large ones then go cooperative: the sender pushes pieces too
    rx[i].hints.cold = i % 4 < 2;     // staged pieces then land with streaming stores
    postPair(link, &sx[i], &rx[i], all);
  }
  drive({link}, all);
  int bad = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sharedBuffers && sizes[i] != 0) {
      std::memcpy(in[i].data(), sIn->at(i), sizes[i]);
      std::memcpy(mirror[i].data(), sMirror->at(i), sizes[i]);
    }
    bad += firstMismatch(in[i], peer, me, static_cast<int>(i)) >= 0;
    if (i % 3 != 0) bad += firstMismatch(mirror[i], me, peer, static_cast<int>(i)) >= 0;
  }
  return bad;
}

// COLL_SHM_CMA: 1 single-copy, 0 staged, auto chosen per message by measurement.
class ShmFork : public ::testing::TestWithParam<const char*> {};

TEST_P(ShmFork, ExchangeBetweenProcesses) {
  const std::string mode = GetParam();
  const bool cma = mode != "0";
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_CMA", mode);
  size_t t = cfg.getSize("COLL_SHM_CMA_THRESHOLD");
  std::vector<size_t> sizes = {0, 1, 63, 64, 4095, t - 1, t, t + 1, (8u << 20) + 3, 8};
  std::string tag = uniqueTag();
  pid_t parent = getpid();
  Child c = forkChild([&](int fd) {
    auto link = connectPair(fd, 1, parent, getpid(), tag, cfg);
    int bad = exchange(link.get(), 1, sizes);
    auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
    if (!shm || shm->singleCopyRecv() != cma) return 10;
    return bad;
  });
  ASSERT_GT(c.pid, 0);
  auto link = connectPair(c.fd, 0, parent, c.pid, tag, cfg);
  auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ(shm->singleCopySend(), cma) << "the child (our descendant) may read us";
  EXPECT_EQ(shm->chooser() != nullptr, mode == "auto");
  EXPECT_EQ(exchange(link.get(), 0, sizes), 0);
  closePair(link, c, tag);
}

INSTANTIATE_TEST_SUITE_P(Shm, ShmFork, ::testing::Values("1", "0", "auto"), [](const auto& info) {
  return std::string(info.param) == "1" ? "SingleCopy" : std::string(info.param) == "0" ? "Staged" : "Auto";
});

// COLL_SHM_CMA=auto with trials back to back: staged and single-copy records (pulled,
// pushed and cooperative ones) follow each other in both directions, and every byte
// arrives where it belongs.
TEST(ShmFork, ChosenModesMixWithoutLosingData) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_CMA", "auto");
  cfg.set("COLL_SHM_CMA_PROBE_MS", "0");
  std::vector<size_t> sizes;
  for (int i = 0; i < 48; ++i) sizes.push_back((size_t{64} << 10) + static_cast<size_t>(i) * 4099);
  sizes.push_back(3);
  std::string tag = uniqueTag();
  pid_t parent = getpid();
  auto mixed = [](const shm::ShmLink* l) {
    return l->chosenSends(shm::CopyModeChooser::kStaged) > 0 && l->chosenSends(shm::CopyModeChooser::kSingle) > 0 &&
           l->chosenSends(shm::CopyModeChooser::kStream) > 0;
  };
  Child c = forkChild([&](int fd) {
    auto link = connectPair(fd, 1, parent, getpid(), tag, cfg);
    int bad = 0;
    for (int round = 0; round < 4; ++round) bad += exchange(link.get(), 1, sizes);
    auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
    if (!shm || !mixed(shm)) return 10;
    return bad;
  });
  ASSERT_GT(c.pid, 0);
  auto link = connectPair(c.fd, 0, parent, c.pid, tag, cfg);
  auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
  ASSERT_NE(shm, nullptr);
  ASSERT_NE(shm->chooser(), nullptr);
  for (int round = 0; round < 4; ++round) EXPECT_EQ(exchange(link.get(), 0, sizes), 0) << "round " << round;
  EXPECT_TRUE(mixed(shm)) << shm->chosenSends(shm::CopyModeChooser::kStaged) << " staged, "
                          << shm->chosenSends(shm::CopyModeChooser::kStream) << " streamed, "
                          << shm->chosenSends(shm::CopyModeChooser::kSingle) << " single-copy";
  closePair(link, c, tag);
}

// Buffers in collMemAlloc memory: every single-copy byte goes through a mapping of the
// peer's region (none through process_vm_readv/writev), pulled, pushed and cooperative
// records alike, and the results are the same.
TEST(ShmFork, SharedBuffersAreCopiedThroughMappings) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_CMA", "1");
  size_t t = cfg.getSize("COLL_SHM_CMA_THRESHOLD");
  std::vector<size_t> sizes = {0, 1, 4095, t - 1, t, t + 1, (8u << 20) + 3, 8, 3u << 20};
  std::string tag = uniqueTag();
  pid_t parent = getpid();
  Child c = forkChild([&](int fd) {
    auto link = connectPair(fd, 1, parent, getpid(), tag, cfg);
    int bad = exchange(link.get(), 1, sizes, true);
    auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
    if (!shm || shm->mappedBytes() == 0) return 10;
    const uint64_t mapped = shm->mappedBytes();
    bad += exchange(link.get(), 1, sizes, false);
    if (shm->mappedBytes() != mapped) return 11;
    return bad;
  });
  ASSERT_GT(c.pid, 0);
  auto link = connectPair(c.fd, 0, parent, c.pid, tag, cfg);
  auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
  ASSERT_NE(shm, nullptr);
  ASSERT_TRUE(shm->singleCopySend() && shm->singleCopyRecv());
  EXPECT_EQ(exchange(link.get(), 0, sizes, true), 0);
  // Every byte of a single-copy message that either side copied: the large ones were
  // pulled by us or pushed by the child; those we pulled or pushed count here.
  EXPECT_GT(shm->mappedBytes(), 0u);
  const uint64_t mine = shm->mappedBytes();
  EXPECT_EQ(exchange(link.get(), 0, sizes, false), 0) << "plain buffers after shared ones";
  EXPECT_EQ(shm->mappedBytes(), mine) << "plain buffers must not go through mappings";
  closePair(link, c, tag);
}

// Makes process_vm_readv fail with ENOSYS in this process, as a seccomp profile that
// forbids it would (the parent is unaffected).
bool refuseCrossMemoryReads() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// The child may not read the parent: that direction falls back to staged copies, the
// other keeps single-copy, and both carry every size intact.
TEST(ShmFork, RefusedSingleCopyFallsBackPerDirection) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_CMA", "1");
  size_t t = cfg.getSize("COLL_SHM_CMA_THRESHOLD");
  std::vector<size_t> sizes = {1, t - 1, t, t + 1, (3u << 20) + 5};
  std::string tag = uniqueTag();
  pid_t parent = getpid();
  Child c = forkChild([&](int fd) {
    if (!refuseCrossMemoryReads()) return 20;
    auto link = connectPair(fd, 1, parent, getpid(), tag, cfg);
    auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
    if (!shm || shm->singleCopyRecv() || !shm->singleCopySend()) return 21;
    return exchange(link.get(), 1, sizes);
  });
  ASSERT_GT(c.pid, 0);
  auto link = connectPair(c.fd, 0, parent, c.pid, tag, cfg);
  auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
  ASSERT_NE(shm, nullptr);
  EXPECT_FALSE(shm->singleCopySend()) << "the child cannot read us";
  EXPECT_TRUE(shm->singleCopyRecv()) << "we can still read the child";
  EXPECT_EQ(exchange(link.get(), 0, sizes), 0);
  closePair(link, c, tag);
}

// The same with COLL_SHM_CMA=auto: the direction the child may not read chooses between
// the two staged ways only (the other among all three), and every byte arrives.
TEST(ShmFork, RefusedSingleCopyLeavesTheStagedWaysToChooseFrom) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_CMA", "auto");
  cfg.set("COLL_SHM_CMA_PROBE_MS", "0");
  std::vector<size_t> sizes;
  for (int i = 0; i < 48; ++i) sizes.push_back((size_t{64} << 10) + static_cast<size_t>(i) * 4099);
  std::string tag = uniqueTag();
  pid_t parent = getpid();
  using M = shm::CopyModeChooser;
  Child c = forkChild([&](int fd) {
    if (!refuseCrossMemoryReads()) return 20;
    auto link = connectPair(fd, 1, parent, getpid(), tag, cfg);
    auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
    if (!shm || shm->singleCopyRecv() || !shm->singleCopySend()) return 21;
    int bad = 0;
    for (int round = 0; round < 4; ++round) bad += exchange(link.get(), 1, sizes);
    return bad;
  });
  ASSERT_GT(c.pid, 0);
  auto link = connectPair(c.fd, 0, parent, c.pid, tag, cfg);
  auto* shm = dynamic_cast<shm::ShmLink*>(link.get());
  ASSERT_NE(shm, nullptr);
  ASSERT_FALSE(shm->singleCopySend());
  for (int round = 0; round < 4; ++round) EXPECT_EQ(exchange(link.get(), 0, sizes), 0) << "round " << round;
  EXPECT_EQ(shm->chosenSends(M::kSingle), 0u);
  EXPECT_GT(shm->chosenSends(M::kStaged), 0u);
  EXPECT_GT(shm->chosenSends(M::kStream), 0u);
  closePair(link, c, tag);
}

TEST(ShmFork, KilledPeerTurnsWaitIntoError) {
  Config cfg = Config::fromEnv();
  std::string tag = uniqueTag();
  pid_t parent = getpid();
  Child c = forkChild([&](int fd) {
    auto link = connectPair(fd, 1, parent, getpid(), tag, cfg);
    uint64_t hello = 42;
    Xfer s{&hello, sizeof hello};
    link->postSend(&s);
    drive({link.get()}, {&s});
    pause();  // until killed
    return 0;
  });
  ASSERT_GT(c.pid, 0);
  auto link = connectPair(c.fd, 0, parent, c.pid, tag, cfg);
  uint64_t got = 0;
  Xfer r{&got, sizeof got};
  link->postRecv(&r);
  drive({link.get()}, {&r});
  EXPECT_EQ(got, 42u);
  // A large single-copy send (waiting for the dead peer's ack) and a receive.
  std::vector<uint8_t> big(4 << 20, 1);
  uint64_t never = 0;
  Xfer s{big.data(), big.size()}, r2{&never, sizeof never};
  link->postSend(&s);
  link->postRecv(&r2);
  kill(c.pid, SIGKILL);
  auto t0 = std::chrono::steady_clock::now();
  Error e = driveUntilError(link.get(), {&s, &r2}, 10);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(e.code(), collRemoteError) << e.what();
  std::string want = "peer rank 1 (pid " + std::to_string(c.pid) + ") died";
  EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  EXPECT_LT(sec, 3) << "noticed by the idle liveness check, not a timeout";
  EXPECT_EQ(reap(c.pid), 128 + SIGKILL);
  ::close(c.fd);
  EXPECT_TRUE(shmLeftovers(tag).empty());
}

// The peer sends and exits at once, without closing the link. Everything it sent before
// it went must be delivered: the check that finds it gone (here from a wait, before any
// progress call looked at the ring) drains the link first.
TEST(ShmFork, WhatAPeerSentBeforeExitingIsDelivered) {
  Config cfg = Config::fromEnv();
  cfg.set("COLL_SHM_CMA", "0");  // staged: the data is in the ring, not in its memory
  std::string tag = uniqueTag();
  pid_t parent = getpid();
  constexpr int kMsgs = 8;
  Child c = forkChild([&](int fd) {
    auto link = connectPair(fd, 1, parent, getpid(), tag, cfg);
    std::vector<std::vector<uint64_t>> bufs(kMsgs);
    std::vector<Xfer> xs(kMsgs);
    std::vector<Xfer*> all;
    for (int i = 0; i < kMsgs; ++i) {
      bufs[i].assign(16 * (i + 1), 1000 + i);
      xs[i] = Xfer{bufs[i].data(), bufs[i].size() * 8};
      link->postSend(&xs[i]);
      all.push_back(&xs[i]);
    }
    drive({link.get()}, all);
    _exit(0);  // no close: the link's status still says active
    return 0;
  });
  ASSERT_GT(c.pid, 0);
  auto link = connectPair(c.fd, 0, parent, c.pid, tag, cfg);
  EXPECT_EQ(reap(c.pid), 0);
  std::vector<std::vector<uint64_t>> got(kMsgs);
  std::vector<Xfer> xr(kMsgs);
  std::vector<Xfer*> all;
  for (int i = 0; i < kMsgs; ++i) {
    got[i].assign(16 * (i + 1), 0);
    xr[i] = Xfer{got[i].data(), got[i].size() * 8};
    link->postRecv(&xr[i]);
    all.push_back(&xr[i]);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // the slow check is due
  link->waitActivity(1);
  drive({link.get()}, all);
  for (int i = 0; i < kMsgs; ++i)
    for (uint64_t v : got[i]) ASSERT_EQ(v, 1000u + i) << "message " << i;
  link.reset();
  ::close(c.fd);
}

// The opener dies after the creator made the segment but before it attached: the
// creator's error path must still unlink the name.
TEST(ShmFork, PeerDyingDuringConnectLeavesNothing) {
  Config cfg = Config::fromEnv();
  std::string tag = uniqueTag();
  pid_t parent = getpid();
  Child c = forkChild([&](int fd) {
    connectPair(fd, 1, parent, getpid(), tag, cfg, /*dieAt=*/1);
    return 0;
  });
  ASSERT_GT(c.pid, 0);
  EXPECT_THROW(connectPair(c.fd, 0, parent, c.pid, tag, cfg), Error);
  EXPECT_EQ(reap(c.pid), 128 + SIGKILL);
  ::close(c.fd);
  EXPECT_TRUE(shmLeftovers(tag).empty());
}

// The creator dies after it made the segment, before it could tell the opener: the
// opener, the only one left that knows the name, must unlink it.
TEST(ShmFork, CreatorDyingDuringConnectLeavesNothing) {
  Config cfg = Config::fromEnv();
  std::string tag = uniqueTag();
  pid_t parent = getpid();
  Child c = forkChild([&](int fd) {
    // Rank 0 (the creator) here, rank 1 the parent.
    connectPair(fd, 0, getpid(), parent, tag, cfg, /*dieAt=*/1);
    return 0;
  });
  ASSERT_GT(c.pid, 0);
  EXPECT_THROW(connectPair(c.fd, 1, c.pid, parent, tag, cfg), Error);
  EXPECT_EQ(reap(c.pid), 128 + SIGKILL);
  ::close(c.fd);
  EXPECT_TRUE(shmLeftovers(tag).empty());
}

// A full /dev/shm does not matter: segments are anonymous memory files, not names there.
// In a child with a mount namespace of its own and a 64 KiB tmpfs on /dev/shm, a segment
// of 2 MiB is made and nothing appears in /dev/shm.
// Exit 0 = as expected, 77 = cannot set up here, other = the failed check.
int fullShmChild() {
  if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount("collshm", "/dev/shm", "tmpfs", 0, "size=64k") != 0)
    return 77;
  try {
    shm::Segment seg = shm::Segment::create("/coll-fulltest-0-1", 1 << 20);
    seg.ring(1)[(1 << 20) - 1] = 1;  // the last page is there
    if (!shmLeftovers("fulltest").empty()) return 4;
  } catch (const Error& e) {
    fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}

TEST(ShmFork, FullDevShmDoesNotMatter) {
  Child c = forkChild([](int) { return fullShmChild(); });
  ASSERT_GT(c.pid, 0);
  ::close(c.fd);
  int rc = reap(c.pid);
  if (rc == 77) GTEST_SKIP() << "cannot mount a private /dev/shm here (needs root)";
  EXPECT_EQ(rc, 0) << "2: an error, 4: left a name in /dev/shm, 135: SIGBUS";
}

// Both ranks of a pair forked from here (this process is neither), joined by a socketpair.
struct TwoRanks {
  pid_t pid[2] = {-1, -1};
};
TwoRanks forkPair(const std::string& tag, const Config& cfg, int dieAt0, int dieAt1, bool exchange) {
  int sv[2];
  TwoRanks t;
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return t;
  int pipeFd[2];
  if (pipe(pipeFd) != 0) return t;
  // Rank 1 needs rank 0's pid before either connects: rank 0 starts first and waits.
  for (int r = 0; r < 2; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      ::close(sv[1 - r]);
      int rc = 0;
      try {
        pid_t p0 = r == 0 ? getpid() : t.pid[0];
        pid_t p1 = 0;
        if (r == 0) {
          if (read(pipeFd[0], &p1, sizeof p1) != static_cast<ssize_t>(sizeof p1)) _exit(97);
        } else {
          p1 = getpid();
        }
        auto link = connectPair(sv[r], r, p0, p1, tag, cfg, r == 0 ? dieAt0 : dieAt1);
        if (exchange) {
          uint64_t v = 7 + r, got = 0;
          Xfer xs{&v, 8}, xr{&got, 8};
          link->postSend(&xs);
          link->postRecv(&xr);
          drive({link.get()}, {&xs, &xr});
          rc = got == uint64_t(8 - r) ? 0 : 3;
        }
      } catch (const std::exception& e) {
        rc = 98;
      }
      _exit(rc);
    }
    t.pid[r] = pid;
    if (r == 1 && write(pipeFd[1], &pid, sizeof pid) != static_cast<ssize_t>(sizeof pid)) ADD_FAILURE();
  }
  ::close(sv[0]);
  ::close(sv[1]);
  ::close(pipeFd[0]);
  ::close(pipeFd[1]);
  return t;
}

// Both ranks die, with no chance to clean up (SIGKILL; a default SIGTERM is the same),
// right after rank 0 made the pair's segment and before rank 1 opened it: the only moment
// a name in /dev/shm would have had nobody left to remove it.
TEST(ShmFork, BothRanksKilledBetweenCreateAndOpenLeaveNothing) {
  Config cfg = Config::fromEnv();
  std::string tag = uniqueTag();
  TwoRanks t = forkPair(tag, cfg, /*dieAt0=*/1, /*dieAt1=*/1, false);
  ASSERT_GT(t.pid[0], 0);
  ASSERT_GT(t.pid[1], 0);
  EXPECT_EQ(reap(t.pid[0]), 128 + SIGKILL);
  EXPECT_EQ(reap(t.pid[1]), 128 + SIGKILL);
  EXPECT_TRUE(shmLeftovers(tag).empty());
}

// Ranks that keep the default SIGTERM action, ended at varied moments of their connect.
TEST(ShmFork, DefaultSigtermDuringConnectLeavesNothing) {
  Config cfg = Config::fromEnv();
  for (int run = 0; run < 12; ++run) {
    std::string tag = uniqueTag();
    TwoRanks t = forkPair(tag, cfg, -1, -1, true);
    ASSERT_GT(t.pid[1], 0);
    std::this_thread::sleep_for(std::chrono::microseconds(250 * run));
    for (pid_t p : t.pid) kill(p, SIGTERM);
    for (pid_t p : t.pid) {
      int rc = reap(p);
      EXPECT_TRUE(rc == 0 || rc == 128 + SIGTERM) << "run " << run << ": exit " << rc;
    }
    EXPECT_TRUE(shmLeftovers(tag).empty()) << "run " << run;
  }
}

}  // namespace
}  // namespace coll::shmtest
