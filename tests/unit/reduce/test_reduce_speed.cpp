// Prints the kernels' single-core throughput on 64 MiB buffers. It checks a few
// results but never asserts on speed (the machine is shared; numbers are for the log).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "base/reduce.hpp"

namespace {

// Best of reps, by wall clock and by this thread's CPU time: on a shared, overloaded
// machine the wall clock mostly measures the scheduler, while CPU time (which includes
// time stalled on memory) still shows what the kernel costs.
struct Timing {
  double wall = 1e30;
  double cpu = 1e30;
};

double cpuNow() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

template <typename Fn>
Timing best(Fn&& fn, int reps) {
  Timing t;
  for (int r = 0; r < reps; ++r) {
    const auto w0 = std::chrono::steady_clock::now();
    const double c0 = cpuNow();
    fn();
    const double c = cpuNow() - c0;
    const std::chrono::duration<double> w = std::chrono::steady_clock::now() - w0;
    t.wall = std::min(t.wall, w.count());
    t.cpu = std::min(t.cpu, c);
  }
  return t;
}

void report(const char* what, size_t bytesWritten, Timing t) {
  const double gb = static_cast<double>(bytesWritten) / 1e9;
  std::printf("[ speed    ] %-32s %6.2f GB/s written by CPU time, %6.2f by wall clock\n", what,
              gb / t.cpu, gb / t.wall);
}

constexpr size_t kBytes = size_t{64} << 20;
constexpr int kReps = 5;

TEST(ReduceSpeed, Float32Sum64MiB) {
  const size_t n = kBytes / sizeof(float);
  std::vector<float> a(n, 1.5f), b(n, 2.25f), dst(n, 0.0f);  // touched: no page faults timed
  report("memcpy (baseline)", kBytes, best([&] {
    std::memcpy(dst.data(), a.data(), kBytes);
  }, kReps));
  report("float32 sum  dst = a + b", kBytes, best([&] {
    coll::reduceBuffers(dst.data(), a.data(), b.data(), n, collFloat32, collSum);
  }, kReps));
  EXPECT_EQ(dst[n - 1], 3.75f);
  report("float32 sum  a += b (in place)", kBytes, best([&] {
    coll::reduceBuffers(a.data(), a.data(), b.data(), n, collFloat32, collSum);
  }, kReps));
  EXPECT_EQ(a[0], 1.5f + kReps * 2.25f);
  report("float32 max  dst = max(a, b)", kBytes, best([&] {
    coll::reduceBuffers(dst.data(), a.data(), b.data(), n, collFloat32, collMax);
  }, kReps));
  EXPECT_EQ(dst[7], a[7]);
}

TEST(ReduceSpeed, SixteenBit64MiB) {
  const size_t n = kBytes / sizeof(uint16_t);
  std::vector<uint16_t> a(n, coll::floatToHalf(1.5f)), b(n, coll::floatToHalf(2.25f)), dst(n, 0);
  report("float16 sum  dst = a + b", kBytes, best([&] {
    coll::reduceBuffers(dst.data(), a.data(), b.data(), n, collFloat16, collSum);
  }, kReps));
  EXPECT_EQ(coll::halfToFloat(dst[n - 1]), 3.75f);
  std::fill(a.begin(), a.end(), coll::floatToBf16(1.5f));
  std::fill(b.begin(), b.end(), coll::floatToBf16(2.25f));
  report("bfloat16 sum dst = a + b", kBytes, best([&] {
    coll::reduceBuffers(dst.data(), a.data(), b.data(), n, collBfloat16, collSum);
  }, kReps));
  EXPECT_EQ(coll::bf16ToFloat(dst[n - 1]), 3.75f);
}

TEST(ReduceSpeed, Conversions64MiB) {
  const size_t n = kBytes / sizeof(float);
  std::vector<float> f(n, 0.1f);
  std::vector<uint16_t> h(n, 0);
  report("floatToHalfN (bytes of half)", n * 2, best([&] {
    coll::floatToHalfN(h.data(), f.data(), n);
  }, kReps));
  EXPECT_EQ(h[5], coll::floatToHalf(0.1f));
  report("halfToFloatN (bytes of float)", n * 4, best([&] {
    coll::halfToFloatN(f.data(), h.data(), n);
  }, kReps));
  report("floatToBf16N (bytes of bf16)", n * 2, best([&] {
    coll::floatToBf16N(h.data(), f.data(), n);
  }, kReps));
  EXPECT_EQ(h[5], coll::floatToBf16(coll::halfToFloat(coll::floatToHalf(0.1f))));
}

}  // namespace
