// Ranks as threads in one process, each with its own communicator (one unique id,
// collCommInitRankConfig per thread). The first exception thrown by any rank is rethrown.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collective.h"
#include "comm.hpp"

namespace collective::frontend::testing {

// `tunables` (NAME, value) configure the communicators, and the engines made on them, in
// place of the environment (collConfig_t::tunables).
inline void runRanks(int nranks, const std::function<void(int rank, collComm_t comm)>& body,
                     const std::vector<std::pair<std::string, std::string>>& tunables = {}) {
  collUniqueId id;
  collCheck(collGetUniqueId(&id), nullptr, "collGetUniqueId");
  std::vector<std::string> entries;
  for (const auto& [name, value] : tunables) entries.push_back(name + "=" + value);
  std::vector<const char*> list;
  for (const auto& e : entries) list.push_back(e.c_str());
  list.push_back(nullptr);
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.tunables = list.data();
  std::mutex mu;
  std::exception_ptr failure;
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        collComm_t comm = nullptr;
        collCheck(collCommInitRankConfig(&comm, nranks, id, r, &cfg), nullptr, "collCommInitRankConfig");
        OwnedComm owner(comm);
        body(r, comm);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace collective::frontend::testing
