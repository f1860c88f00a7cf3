// Single-core memcpy bandwidth: the ceiling a host all-reduce is measured against
// (every algorithm moves each byte through memory at least a few times).
//   memcpy_bench [bytes (default 64M)] [iterations (default 10)]
// Prints one line: "memcpy <bytes> bytes: <GB/s> GB/s (1 core)", bytes copied per second.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common.hpp"

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{64} << 20;
  int iters = 10;
  try {
    if (argc > 1) bytes = perf::parseSize(argv[1], "bytes");
    if (argc > 2) iters = std::max(1, std::atoi(argv[2]));
  } catch (const perf::UsageError& e) {
    std::fprintf(stderr, "memcpy_bench: %s\n", e.what());
    return 2;
  }
  if (bytes == 0) bytes = 1;
  size_t alloc = (bytes + 4095) / 4096 * 4096;
  std::unique_ptr<char, FreeDeleter> src(static_cast<char*>(std::aligned_alloc(4096, alloc)));
  std::unique_ptr<char, FreeDeleter> dst(static_cast<char*>(std::aligned_alloc(4096, alloc)));
  if (!src || !dst) {
    std::fprintf(stderr, "memcpy_bench: cannot allocate 2 x %zu bytes\n", bytes);
    return 1;
  }
  // Touch both so that page faults are not timed.
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 0, bytes);
  std::memcpy(dst.get(), src.get(), bytes);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    std::memcpy(dst.get(), src.get(), bytes);
    // Keeps the compiler from proving the copies redundant.
    asm volatile("" : : "r"(dst.get()) : "memory");
  }
  std::chrono::duration<double> el = std::chrono::steady_clock::now() - start;
  double gbps = static_cast<double>(bytes) * iters / el.count() / 1e9;
  std::printf("memcpy %zu bytes: %.2f GB/s (1 core)\n", bytes, gbps);
  return 0;
}
