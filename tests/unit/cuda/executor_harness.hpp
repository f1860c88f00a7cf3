// A stream executor over the simulated CUDA runtime (fake_backend.hpp) that records every
// error it reports, with short waits, for the executor's logic tests.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "base/error.hpp"
#include "cuda/stream_ops.hpp"
#include "fake_backend.hpp"

namespace coll::cuda::testing {

struct ExecutorHarness {
  std::shared_ptr<fake::Backend> backend = std::make_shared<fake::Backend>();
  std::mutex mu;
  std::vector<coll::Error> errors;
  StreamOptions opts;
  std::unique_ptr<StreamExecutor> exec;

  explicit ExecutorHarness(size_t chunkBytes = 0, double timeout = 10) {
    opts.chunkBytes = chunkBytes;
    opts.timeoutSec = timeout;
    opts.spinCount = 10;
    opts.maxSleepUs = 100;
    exec = std::make_unique<StreamExecutor>(backend, [this](const coll::Error& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors.push_back(e);
    }, opts);
  }
  std::vector<coll::Error> errorsSeen() {
    std::lock_guard<std::mutex> lock(mu);
    return errors;
  }
};

}  // namespace coll::cuda::testing
