#include "shm_test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>

#include "../thread_ranks.hpp"

namespace coll::shmtest {

Error driveUntilError(Link* link, const std::vector<Xfer*>& xfers, double timeoutSec) {
  try {
    drive({link}, xfers, timeoutSec);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error from the link, but the transfers completed";
  return Error(collSuccess, "");
}

void runRanks(int n, const std::function<void(int)>& fn) { threadranks::run(n, fn); }

LinkTable connectAll(int n, const Config& cfg, const std::string& tag) {
  auto group = std::make_shared<ThreadGroup>(n);
  LinkTable table(n);
  runRanks(n, [&](int r) {
    ThreadBootstrap boot(group, r, n);
    TransportContext ctx;
    ctx.rank = r;
    ctx.nranks = n;
    ctx.cfg = &cfg;
    ctx.bootstrap = &boot;
    ctx.hostIds.assign(n, "host");
    ctx.pids.assign(n, getpid());
    ctx.jobTag = tag;
    std::vector<int> peers;
    for (int p = 0; p < n; ++p)
      if (p != r) peers.push_back(p);
    std::unique_ptr<Transport> shm = makeTransport("shm");
    if (!shm) COLL_THROW(collInternalError, "the shm transport is not registered");
    table[r] = shm->connect(ctx, peers);
  });
  return table;
}

std::string uniqueTag() {
  static std::atomic<int> counter{0};
  char buf[64];
  snprintf(buf, sizeof buf, "shmtest%dx%d", static_cast<int>(getpid()), counter++);
  return buf;
}

std::vector<std::string> shmLeftovers(const std::string& tag) {
  std::vector<std::string> found;
  DIR* d = opendir("/dev/shm");
  if (!d) return found;
  std::string prefix = "coll-" + tag + "-";
  while (dirent* e = readdir(d))
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) found.push_back(e->d_name);
  closedir(d);
  return found;
}

void fillPattern(std::vector<uint8_t>& buf, int src, int dst, int idx) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(src, dst, idx, i);
}

long firstMismatch(const std::vector<uint8_t>& buf, int src, int dst, int idx) {
  for (size_t i = 0; i < buf.size(); ++i)
    if (buf[i] != pattern(src, dst, idx, i)) return static_cast<long>(i);
  return -1;
}

}  // namespace coll::shmtest
