// Two real processes joined by a shm link, for the fork tests (shm_fork_test.cpp,
// shm_fork_reduce_test.cpp): the child runs a body whose return value is its exit status,
// the parent checks it and that nothing of the pair is left in /dev/shm.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/shared_mem.hpp"
#include "shm_test_util.hpp"

namespace coll::shmtest {

struct Child {
  pid_t pid = -1;
  int fd = -1;  // the parent's end of the bootstrap socketpair
};

// Runs body(fd) in a child process whose exit status is body's return value.
inline Child forkChild(const std::function<int(int)>& body) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    ::close(sv[0]);
    int rc = 99;
    try {
      rc = body(sv[1]);
    } catch (const std::exception& e) {
      fprintf(stderr, "child: %s\n", e.what());
      rc = 98;
    }
    _exit(rc);
  }
  ::close(sv[1]);
  return {pid, sv[0]};
}

inline int reap(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Rank 0 is the parent, rank 1 the child.
inline std::unique_ptr<Link> connectPair(int fd, int rank, pid_t parent, pid_t child,
                                  const std::string& tag, const Config& cfg, int dieAt = -1) {
  PairBootstrap boot(fd, rank, dieAt);
  return connectShmPair(boot, rank, parent, child, tag, cfg);
}

// Closes our end of the link, expects the child to exit with 0 and nothing of the pair
// to be left in /dev/shm.
inline void closePair(std::unique_ptr<Link>& link, const Child& c, const std::string& tag) {
  link.reset();
  EXPECT_EQ(reap(c.pid), 0);
  ::close(c.fd);
  EXPECT_TRUE(shmLeftovers(tag).empty());
}

// collMemAlloc memory for the buffers of one window, each at its own offset of one
// region (so that a peer translates offsets, not just bases).
class SharedWindow {
 public:
  explicit SharedWindow(const std::vector<size_t>& sizes) {
    size_t total = 0;
    for (size_t n : sizes) {
      at_.push_back(total);
      total += (n + 64 + 63) / 64 * 64;  // 64 bytes apart even when n is a multiple of 64
    }
    base_ = static_cast<uint8_t*>(SharedAllocations::instance().allocate(total));
  }
  ~SharedWindow() { SharedAllocations::instance().release(base_); }
  uint8_t* at(size_t i) { return base_ + at_[i] + 64 * (i % 2); }

 private:
  std::vector<size_t> at_;
  uint8_t* base_;
};

// Posts a receive, then a send, and notes both for drive().
inline void postPair(Link* link, Xfer* send, Xfer* recv, std::vector<Xfer*>& all) {
  link->postRecv(recv);
  link->postSend(send);
  all.push_back(send);
  all.push_back(recv);
}

}  // namespace coll::shmtest
