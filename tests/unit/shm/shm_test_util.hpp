// Helpers for the shm transport tests: bootstraps for ranks as threads and for two
// forked processes, a driver that progresses links until transfers finish, and checks
// for leftovers in /dev/shm.
#pragma once

#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "base/wait.hpp"
#include "transport/transport.hpp"

namespace coll::shmtest {

// All-gathers among threads of this process (the subset of Bootstrap the transport uses).
class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), slots_(n) {}
  std::vector<uint8_t> allGather(int rank, const void* mine, size_t bytes, double timeoutSec) {
    std::unique_lock<std::mutex> lk(mu_);
    uint64_t gen = gen_;
    const uint8_t* p = static_cast<const uint8_t*>(mine);
    slots_[rank].assign(p, p + bytes);
    if (++arrived_ == n_) {
      result_.clear();
      for (auto& s : slots_) result_.insert(result_.end(), s.begin(), s.end());
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
      return result_;
    }
    if (!cv_.wait_for(lk, std::chrono::duration<double>(timeoutSec), [&] { return gen_ != gen; }))
      COLL_THROW(collTimeout, "test all-gather: rank ", rank, " timed out");
    return result_;  // stays valid until every rank (us included) enters the next round
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int arrived_ = 0;
  uint64_t gen_ = 0;
  std::vector<std::vector<uint8_t>> slots_;
  std::vector<uint8_t> result_;
};

class FakeBootstrap : public Bootstrap {
 public:
  FakeBootstrap(int rank, int nranks) : rank_(rank), nranks_(nranks), peers_(nranks) {}
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const std::vector<PeerInfo>& peers() const override { return peers_; }
  void barrier() override { char c = 0; allGather(&c, 1); }
  bool failureReported(std::string*) override { return false; }
  void abort(const std::string&) override {}
  void close() override {}

 protected:
  int rank_, nranks_;
  std::vector<PeerInfo> peers_;
};

class ThreadBootstrap : public FakeBootstrap {
 public:
  ThreadBootstrap(std::shared_ptr<ThreadGroup> g, int rank, int nranks)
      : FakeBootstrap(rank, nranks), g_(std::move(g)) {}
  std::vector<uint8_t> allGather(const void* mine, size_t bytes) override {
    return g_->allGather(rank_, mine, bytes, 20);
  }

 private:
  std::shared_ptr<ThreadGroup> g_;
};

// Two processes joined by a socketpair; `dieAtGather` (>= 0) kills this process with
// SIGKILL when it enters that all-gather (0-based), to test a peer dying mid-connect.
class PairBootstrap : public FakeBootstrap {
 public:
  PairBootstrap(int fd, int rank, int dieAtGather = -1)
      : FakeBootstrap(rank, 2), fd_(fd), dieAt_(dieAtGather) {}
  std::vector<uint8_t> allGather(const void* mine, size_t bytes) override;

 private:
  int fd_;
  int dieAt_;
  int gathers_ = 0;
};

// Connects the shm link between the two processes of `boot` (rank 0 runs as pid0, rank 1
// as pid1) and returns this rank's link to the other.
std::unique_ptr<Link> connectShmPair(PairBootstrap& boot, int rank, pid_t pid0, pid_t pid1,
                                     const std::string& tag, const Config& cfg);

// Progresses `links` until every transfer completes; throws coll::Error from the links
// or collTimeout.
void drive(const std::vector<Link*>& links, const std::vector<Xfer*>& xfers,
           double timeoutSec = 30);
// Runs progress on `link` until it throws; returns the error (fails the test if none).
Error driveUntilError(Link* link, const std::vector<Xfer*>& xfers, double timeoutSec = 10);

// Runs fn(rank) on n threads; collects exceptions as test failures.
void runRanks(int n, const std::function<void(int)>& fn);

// Connects every rank of a thread group to every other over shm: links[rank][peer].
using LinkTable = std::vector<std::map<int, std::unique_ptr<Link>>>;
LinkTable connectAll(int n, const Config& cfg, const std::string& tag);

std::string uniqueTag();
// Names in /dev/shm that belong to the job `tag`.
std::vector<std::string> shmLeftovers(const std::string& tag);

// Deterministic test bytes for message `idx` from `src` to `dst`.
inline uint8_t pattern(int src, int dst, int idx, size_t off) {
  return static_cast<uint8_t>(src * 131 + dst * 31 + idx * 7 + off * 13 + (off >> 9));
}
void fillPattern(std::vector<uint8_t>& buf, int src, int dst, int idx);
// Index of the first wrong byte, or -1.
long firstMismatch(const std::vector<uint8_t>& buf, int src, int dst, int idx);

}  // namespace coll::shmtest
