// Helpers shared by the UCX plugin's tests and their peer process: loading the plugin
// (its path comes from the build), a deterministic byte pattern both processes can
// check, and small wrappers that turn plugin failures into readable text.
#pragma once

#include <dlfcn.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "coll_net.h"

namespace net_ucx_test {

using Api = collNetPlugin_v1_t;

inline double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Loads the plugin once per process; NULL with *why set when that fails.
inline const Api* loadPlugin(const char* path, std::string* why) {
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    *why = std::string("dlopen: ") + dlerror();
    return nullptr;
  }
  auto* api = static_cast<const Api*>(dlsym(dl, COLL_NET_SYMBOL));
  if (!api) *why = std::string("dlsym " COLL_NET_SYMBOL ": ") + dlerror();
  return api;
}

inline void logToStderr(collNetLogLevel_t level, const char* message) {
  if (level == collNetLogWarn || getenv("NET_UCX_TEST_LOG")) fprintf(stderr, "[plugin %d] %s\n", int(level), message);
}

inline uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Random bytes determined by the seed, so a peer process can check them.
inline void fillPattern(unsigned char* p, size_t n, uint64_t seed) {
  uint64_t s = seed;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = splitmix(s);
    memcpy(p + i, &v, 8);
  }
  if (i < n) {
    uint64_t v = splitmix(s);
    memcpy(p + i, &v, n - i);
  }
}

// Index of the first byte that differs from the pattern, or n when all match.
inline size_t checkPattern(const unsigned char* p, size_t n, uint64_t seed) {
  std::vector<unsigned char> want(n);
  fillPattern(want.data(), n, seed);
  for (size_t i = 0; i < n; ++i)
    if (p[i] != want[i]) return i;
  return n;
}

// Tests a request until it is done, fails, or the timeout passes. Returns 0 when done,
// 1 on a plugin error (text in *err), 2 on timeout.
inline int waitRequest(const Api* api, void* ctx, void* req, size_t* size, uint64_t* tag, double timeoutSec,
                       std::string* err) {
  double deadline = now() + timeoutSec;
  while (now() < deadline) {
    int done = 0;
    if (api->test(req, &done, size, tag) != 0) {
      *err = api->lastError(ctx);
      return 1;
    }
    if (done) return 0;
  }
  *err = "timed out";
  return 2;
}

}  // namespace net_ucx_test
