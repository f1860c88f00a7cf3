// The parts of the test helpers that need no GoogleTest (shared with shm_bench).
#include <signal.h>

#include "shm_test_util.hpp"

namespace coll::shmtest {
namespace {

void writeAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);  // no SIGPIPE when the peer died
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) COLL_THROW(collRemoteError, "test bootstrap: write failed");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void readAll(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) COLL_THROW(collRemoteError, "test bootstrap: peer went away");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

}  // namespace

std::vector<uint8_t> PairBootstrap::allGather(const void* mine, size_t bytes) {
  if (gathers_++ == dieAt_) raise(SIGKILL);
  std::vector<uint8_t> out(2 * bytes);
  std::memcpy(out.data() + rank_ * bytes, mine, bytes);
  writeAll(fd_, static_cast<const uint8_t*>(mine), bytes);
  readAll(fd_, out.data() + (1 - rank_) * bytes, bytes);
  return out;
}

void drive(const std::vector<Link*>& links, const std::vector<Xfer*>& xfers, double timeoutSec) {
  Deadline deadline(timeoutSec);
  Backoff backoff(200, 200);
  for (;;) {
    bool done = true;
    for (Xfer* x : xfers) done = done && x->complete;
    if (done) return;
    bool moved = false;
    for (Link* l : links) moved |= l->progress();
    if (moved) {
      backoff.reset();
      continue;
    }
    if (deadline.expired()) COLL_THROW(collTimeout, "test drive: transfers did not complete");
    // Spin, then yield (Backoff), then sleep on the first link's futex: up to 8 ranks
    // share 2 cores in these tests.
    if (backoff.idleCount() < 264)
      backoff.idle();
    else
      links[0]->waitActivity(1);
  }
}

std::unique_ptr<Link> connectShmPair(PairBootstrap& boot, int rank, pid_t pid0, pid_t pid1,
                                     const std::string& tag, const Config& cfg) {
  TransportContext ctx;
  ctx.rank = rank;
  ctx.nranks = 2;
  ctx.cfg = &cfg;
  ctx.bootstrap = &boot;
  ctx.pids = {pid0, pid1};
  ctx.jobTag = tag;
  auto links = makeTransport("shm")->connect(ctx, {1 - rank});
  return std::move(links.at(1 - rank));
}

}  // namespace coll::shmtest
