// Ranks as threads in one process, each with its own communicator (one unique id,
// collCommInitRank per thread). The first exception thrown by any rank is rethrown.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "collective.h"
#include "comm.hpp"

namespace collective::frontend::testing {

inline void runRanks(int nranks, const std::function<void(int rank, collComm_t comm)>& body) {
  collUniqueId id;
  collCheck(collGetUniqueId(&id), nullptr, "collGetUniqueId");
  std::mutex mu;
  std::exception_ptr failure;
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        collComm_t comm = nullptr;
        collCheck(collCommInitRank(&comm, nranks, id, r), nullptr, "collCommInitRank");
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
