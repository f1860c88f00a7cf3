// Helpers for the InfiniBand backend's tests: a backend over a fake fabric, connected
// pairs, and driving requests to completion with a deadline.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/config.hpp"
#include "fake_verbs.hpp"
#include "transport/net/ib/verbs_ops.hpp"
#include "transport/net/net_backend.hpp"

namespace coll::net::ib::test {

// The backend, initialised over `fabric` (or the real libibverbs when null) with
// `tunables` (COLL_IB_*) in place of the environment's.
class Backend {
 public:
  explicit Backend(const fake::FakeFabric* fabric, const ConfigOverrides& tunables = {}) {
    setVerbsOpsForTesting(fabric ? fabric->ops() : nullptr);
    rc = ibBackendInit(Config::fromEnv(tunables), nullptr, &ctx);
  }
  ~Backend() {
    if (ctx) p->finalize(ctx);
    setVerbsOpsForTesting(nullptr);
  }
  std::string error() const { return p->lastError(ctx); }
  const collNetPlugin_v1_t* p = ibBackend();
  void* ctx = nullptr;
  int rc = -1;
};

struct Pair {
  void* send = nullptr;
  void* recv = nullptr;
};

// listen on devRecv, connect from devSend, accept: one connection devSend -> devRecv.
inline Pair connectPair(const Backend& b, int devSend, int devRecv) {
  Pair pr;
  char handle[COLL_NET_HANDLE_BYTES], reply[COLL_NET_HANDLE_BYTES];
  void* listen = nullptr;
  EXPECT_EQ(b.p->listen(b.ctx, devRecv, handle, &listen), 0) << b.error();
  EXPECT_EQ(b.p->connect(b.ctx, devSend, handle, reply, &pr.send), 0) << b.error();
  EXPECT_EQ(b.p->accept(listen, reply, &pr.recv), 0) << b.error();
  return pr;
}

inline void closePair(const Backend& b, Pair& pr) {
  if (pr.send) {
    EXPECT_EQ(b.p->closeSend(pr.send), 0) << b.error();
  }
  if (pr.recv) {
    EXPECT_EQ(b.p->closeRecv(pr.recv), 0) << b.error();
  }
  pr = Pair{};
}

using Clock = std::chrono::steady_clock;

// Tests `req` until done, a failure (returns the non-zero code) or `seconds` pass.
inline int waitRequest(const Backend& b, void* req, size_t* size = nullptr, uint64_t* tag = nullptr,
                       double seconds = 20) {
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  int done = 0;
  while (Clock::now() < end) {
    int rc = b.p->test(req, &done, size, tag);
    if (rc) return rc;
    if (done) return 0;
  }
  ADD_FAILURE() << "request not done after " << seconds << " s";
  return -1;
}

inline std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 g(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = g();
    memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = uint8_t(g());
  return v;
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace coll::net::ib::test
