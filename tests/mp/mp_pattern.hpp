// Test data for reductions: small integers whose reduction over up to 8 ranks is exact in
// every type (int8 and float16/bfloat16 included) and, for avg, divides evenly, so every
// result can be compared bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "mp_util.hpp"

namespace mp {

// The data repeats with this period (a prime, so that chunk and block boundaries, which
// are mostly powers of two or multiples of nranks, never line up with it): computing the
// expected values then costs one period instead of the whole count.
constexpr size_t kPeriod = 4099;

class ReducePattern {
 public:
  ReducePattern(collDataType_t dt, collRedOp_t op, int nranks, uint32_t salt);
  // buf[j] = rank's input element (first + j), for j < count.
  void fillInput(void* buf, size_t count, int rank, size_t first) const;
  // buf[j] = the reduction over all ranks of element (first + j).
  void fillExpected(void* buf, size_t count, size_t first) const;

 private:
  collDataType_t dt_;
  size_t es_;
  std::vector<std::vector<uint8_t>> inputs_;  // one period per rank
  std::vector<uint8_t> expected_;             // one period
};

// Element k of a payload identified by tag (which rank sent it to whom), for
// collectives that move data without reducing it.
double payloadValue(collDataType_t dt, uint64_t tag, size_t k);
void fillPayload(void* buf, size_t count, collDataType_t dt, uint64_t tag);

// Counts a test runs at: 0, 1, a prime, one that no nranks in 2..8 divides, and
// (unless quick) about 1 MiB of data, divided by `split` for per-rank counts. With
// ctx.sample only one of them, picked by `rotation` (the same on every rank), so that
// consecutive cases cycle through all counts.
std::vector<size_t> testCounts(const Ctx& ctx, collDataType_t dt, int split, unsigned rotation);

// Buffers of at least one element, so that count 0 still passes real pointers.
inline std::vector<uint8_t> buffer(size_t count, collDataType_t dt, uint8_t fill) {
  return std::vector<uint8_t>((count ? count : 1) * collTypeSize(dt), fill);
}

}  // namespace mp
