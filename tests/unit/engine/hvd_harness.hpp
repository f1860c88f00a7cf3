// Helpers shared by the hvd API tests: ranks as threads, each with its own communicator
// from one shared unique id (collGetUniqueId + collCommInitRankConfig).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collective/hvd.hpp"
#include "../thread_ranks.hpp"

namespace hvdtest {

namespace hvd = collective::hvd;

inline void onRanks(int n, const std::function<void(int)>& fn) { threadranks::run(n, fn); }

// Tunables for the communicators (collConfig_t::tunables), which their engines take too.
using Tunables = std::vector<std::pair<std::string, std::string>>;

// n communicators of one job, made with `tunables`; fn(rank, comm).
inline void withComms(int n, const std::function<void(int, collComm_t)>& fn, const Tunables& tunables = {}) {
  collUniqueId id;
  ASSERT_EQ(collGetUniqueId(&id), collSuccess) << collGetLastError(nullptr);
  std::vector<std::string> entries;
  for (const auto& [name, value] : tunables) entries.push_back(name + "=" + value);
  std::vector<const char*> list;
  for (const auto& e : entries) list.push_back(e.c_str());
  list.push_back(nullptr);
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.tunables = list.data();
  std::vector<collComm_t> comms(n, nullptr);
  onRanks(n, [&](int r) {
    if (collCommInitRankConfig(&comms[r], n, id, r, &cfg) != collSuccess)
      throw std::runtime_error(collGetLastError(nullptr));
  });
  for (auto c : comms) ASSERT_NE(c, nullptr);
  onRanks(n, [&](int r) { fn(r, comms[r]); });
  onRanks(n, [&](int r) { collCommDestroy(comms[r]); });
}

inline hvd::Tensor view(std::vector<float>& v) { return {v.data(), collFloat32, {static_cast<int64_t>(v.size())}}; }

}  // namespace hvdtest
