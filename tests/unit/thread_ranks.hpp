// Running ranks as threads in a test: fn(rank) on n threads, each thread's exception kept
// and reported per rank once all have joined (a failure on one rank must not leave the
// others blocked waiting for it in a rethrow).
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace threadranks {

inline void run(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace threadranks
