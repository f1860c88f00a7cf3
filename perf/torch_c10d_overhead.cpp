// What the torch.distributed backend adds per call to the C API beneath it: two ranks
// (threads of this process, rendezvousing through a c10d HashStore) all-reduce a small
// float32 tensor (max of ones, checked), ITERS calls through ProcessGroupCollective::allreduce(...)->wait() and
// ITERS through collAllReduce on a communicator of the same two ranks, the two kinds
// interleaved round by round. Prints each round's microseconds per call of both and the
// difference, then min / median / max of the difference.
//
//   torch_c10d_overhead [--iters N] [--rounds R] [--bytes B]     (defaults 20000, 7, 8)
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collective.h"
#include "process_group.hpp"

namespace {

constexpr int kRanks = 2;

struct Round {
  double pgUs = 0, capiUs = 0;
};

void check(collResult_t r, const char* what) {
  if (r != collSuccess) throw std::runtime_error(std::string(what) + ": " + collGetErrorString(r));
}

double usPerCall(int iters, const std::function<void()>& call) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) call();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
}

void rankMain(const c10::intrusive_ptr<c10d::Store>& store, int rank, int iters, int rounds, size_t bytes,
              std::vector<Round>* out) {
  auto pg = c10::make_intrusive<collective_c10d::ProcessGroupCollective>(store, rank, kRanks,
                                                                        std::chrono::milliseconds(60000));
  // A communicator of the same ranks for the direct calls; its id goes through the store.
  collUniqueId id;
  if (rank == 0) {
    check(collGetUniqueId(&id), "collGetUniqueId");
    store->set("overhead-id", std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id),
                                                   reinterpret_cast<uint8_t*>(&id) + sizeof id));
  } else {
    std::vector<uint8_t> got = store->get("overhead-id");
    if (got.size() != sizeof id) throw std::runtime_error("the unique id from the store has the wrong size");
    std::memcpy(&id, got.data(), sizeof id);
  }
  collComm_t comm = nullptr;
  check(collCommInitRank(&comm, kRanks, id, rank), "collCommInitRank");
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(bytes / 4));
  std::vector<at::Tensor> t{at::ones({n})};
  std::vector<float> buf(static_cast<size_t>(n), 1.0f);
  c10d::AllreduceOptions maxOpts;
  maxOpts.reduceOp = c10d::ReduceOp::MAX;  // values stay ones, checked at the end
  auto viaPg = [&] { pg->allreduce(t, maxOpts)->wait(); };
  auto viaCapi = [&] {
    check(collAllReduce(buf.data(), buf.data(), buf.size(), collFloat32, collMax, comm, nullptr), "collAllReduce");
  };
  // Warm both paths (first-use connections, buffers).
  usPerCall(200, viaPg);
  usPerCall(200, viaCapi);
  for (int r = 0; r < rounds; ++r) {
    Round one;
    pg->barrier()->wait();
    // Alternate which kind goes first, so neither always runs on the warmer machine.
    if (r % 2 == 0) {
      one.pgUs = usPerCall(iters, viaPg);
      one.capiUs = usPerCall(iters, viaCapi);
    } else {
      one.capiUs = usPerCall(iters, viaCapi);
      one.pgUs = usPerCall(iters, viaPg);
    }
    if (rank == 0) out->push_back(one);
  }
  for (float v : buf)
    if (v != 1.0f) throw std::runtime_error("collAllReduce(max) of ones gave " + std::to_string(v));
  if (!at::equal(t[0], at::ones({n}))) throw std::runtime_error("the process group's all-reduce(max) of ones changed them");
  pg->barrier()->wait();
  check(collCommDestroy(comm), "collCommDestroy");
}

long arg(int argc, char** argv, const char* name, long def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) {
      char* end = nullptr;
      long v = std::strtol(argv[i + 1], &end, 10);
      if (!end || *end || v < 1) {
        std::fprintf(stderr, "%s wants a positive whole number, not '%s'\n", name, argv[i + 1]);
        std::exit(2);
      }
      return v;
    }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i += 2)
    if (std::strcmp(argv[i], "--iters") && std::strcmp(argv[i], "--rounds") && std::strcmp(argv[i], "--bytes")) {
      std::fprintf(stderr, "usage: %s [--iters N] [--rounds R] [--bytes B]\n", argv[0]);
      return 2;
    }
  const int iters = static_cast<int>(arg(argc, argv, "--iters", 20000));
  const int rounds = static_cast<int>(arg(argc, argv, "--rounds", 7));
  const size_t bytes = static_cast<size_t>(arg(argc, argv, "--bytes", 8));
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<Round> results;
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      try {
        rankMain(store, r, iters, rounds, bytes, &results);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r)
    if (!errors[r].empty()) {
      std::fprintf(stderr, "rank %d: %s\n", r, errors[r].c_str());
      return 1;
    }
  std::printf("# %d ranks (threads), all-reduce of %zu bytes, %d calls per round and kind\n", kRanks, bytes, iters);
  std::printf("%6s %14s %14s %14s\n", "round", "c10d_us", "c_api_us", "overhead_us");
  std::vector<double> diff;
  for (size_t i = 0; i < results.size(); ++i) {
    diff.push_back(results[i].pgUs - results[i].capiUs);
    std::printf("%6zu %14.2f %14.2f %14.2f\n", i, results[i].pgUs, results[i].capiUs, diff.back());
  }
  std::sort(diff.begin(), diff.end());
  std::printf("# overhead per call, us: min %.2f median %.2f max %.2f\n", diff.front(), diff[diff.size() / 2],
              diff.back());
  return 0;
}
