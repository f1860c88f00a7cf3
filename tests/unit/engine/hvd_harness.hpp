// Helpers shared by the hvd API tests: ranks as threads, each with its own communicator
// from one shared unique id (collGetUniqueId + collCommInitRank).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collective/hvd.hpp"
#include "../thread_ranks.hpp"

namespace hvdtest {

namespace hvd = collective::hvd;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

inline void onRanks(int n, const std::function<void(int)>& fn) { threadranks::run(n, fn); }

// n communicators of one job; fn(rank, comm).
inline void withComms(int n, const std::function<void(int, collComm_t)>& fn) {
  collUniqueId id;
  ASSERT_EQ(collGetUniqueId(&id), collSuccess) << collGetLastError(nullptr);
  std::vector<collComm_t> comms(n, nullptr);
  onRanks(n, [&](int r) {
    if (collCommInitRank(&comms[r], n, id, r) != collSuccess)
      throw std::runtime_error(collGetLastError(nullptr));
  });
  for (auto c : comms) ASSERT_NE(c, nullptr);
  onRanks(n, [&](int r) { fn(r, comms[r]); });
  onRanks(n, [&](int r) { collCommDestroy(comms[r]); });
}

inline hvd::Tensor view(std::vector<float>& v) { return {v.data(), collFloat32, {static_cast<int64_t>(v.size())}}; }

}  // namespace hvdtest
