// Helpers for the InfiniBand backend's tests: a backend over a fake fabric, connected
// pairs, and driving requests to completion with a deadline.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fake_verbs.hpp"
#include "transport/net/ib/verbs_ops.hpp"
#include "transport/net/net_backend.hpp"

namespace coll::net::ib::test {

// Sets environment variables for a scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(std::initializer_list<std::pair<std::string, std::string>> vars) {
    for (auto& [k, v] : vars) set(k, v);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const std::string& k, const std::string& v) {
    if (!saved_.count(k)) {
      const char* old = getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// The backend, initialised over `fabric` (or the real libibverbs when null).
class Backend {
 public:
  explicit Backend(const fake::FakeFabric* fabric) {
    setVerbsOpsForTesting(fabric ? fabric->ops() : nullptr);
    rc = p->init(nullptr, &ctx);
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
