// In-process test harness: N ranks as threads, each with its own communicator made from
// one shared unique id, talking over real transports on this host.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collective.h"

namespace testing_coll {

// Sets an environment variable for the lifetime of the object (communicators read their
// tunables when they are made). For tests whose subject is the environment; the others
// give their tunables to the Job (collConfig_t::tunables).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// Runs fn(rank) on n threads at once and joins them.
inline void onRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back(fn, r);
  for (auto& t : ts) t.join();
}

// Tunables for communicators (collConfig_t::tunables), NAME and value.
using Tunables = std::vector<std::pair<std::string, std::string>>;

// collCommInitRankConfig with `tunables` in place of the environment's.
inline collResult_t initRank(collComm_t* comm, int n, const collUniqueId& id, int rank,
                             const Tunables& tunables = {}) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : tunables) entries.push_back(name + "=" + value);
  std::vector<const char*> list;
  for (const auto& e : entries) list.push_back(e.c_str());
  list.push_back(nullptr);
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.tunables = list.data();
  return collCommInitRankConfig(comm, n, id, rank, &cfg);
}

class Job {
 public:
  // n ranks; `tunables` configure their communicators in place of the environment.
  explicit Job(int n, const Tunables& tunables = {}) : comms_(n, nullptr) {
    collUniqueId id;
    EXPECT_EQ(collGetUniqueId(&id), collSuccess) << collGetLastError(nullptr);
    std::vector<collResult_t> rc(n);
    onRanks(n, [&](int r) { rc[r] = initRank(&comms_[r], n, id, r, tunables); });
    for (int r = 0; r < n; ++r) EXPECT_EQ(rc[r], collSuccess) << "rank " << r << ": " << collGetLastError(nullptr);
  }
  ~Job() {
    onRanks(size(), [&](int r) {
      if (comms_[r]) collCommDestroy(comms_[r]);
    });
  }
  int size() const { return static_cast<int>(comms_.size()); }
  collComm_t comm(int r) const { return comms_[r]; }
  bool ok() const {
    for (auto c : comms_)
      if (!c) return false;
    return true;
  }
  void run(const std::function<void(int, collComm_t)>& fn) {
    onRanks(size(), [&](int r) { fn(r, comms_[r]); });
  }
  // Forgets a communicator the test destroyed or aborted itself.
  void forget(int r) { comms_[r] = nullptr; }

 private:
  std::vector<collComm_t> comms_;
};

}  // namespace testing_coll
