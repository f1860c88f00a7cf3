#include "mp_pattern.hpp"

#include <algorithm>
#include <cstring>

namespace mp {
namespace {

// Input of `rank` at period position i. Sum/avg: a base plus deviations that cancel over
// the ranks, so the average is exactly the base. Prod: -1, 1 or 2, at most three 2s over
// 8 ranks. Max/min and the bitwise ops: 0..16, shifted to -8..8 for signed types.
int64_t inputValue(collRedOp_t op, bool sgn, int rank, int n, size_t i, uint32_t salt) {
  uint32_t h = mix(i, salt);
  switch (op) {
    case collSum:
    case collAvg: {
      int64_t base = (n - 1) + h % 5;  // >= n-1, so unsigned inputs are never negative
      int64_t v = base + 2 * rank - (n - 1);
      return sgn ? v - (n + 1) : v;
    }
    case collProd: {
      uint32_t k = (h + rank) % 3;
      return k == 1 ? 2 : (k == 0 && sgn ? -1 : 1);
    }
    default:
      return static_cast<int64_t>((h % 17 + rank * 3) % 17) - (sgn ? 8 : 0);
  }
}

int64_t combine(collRedOp_t op, int64_t a, int64_t b) {
  switch (op) {
    case collProd: return a * b;
    case collMax: return std::max(a, b);
    case collMin: return std::min(a, b);
    case collBand: return a & b;
    case collBor: return a | b;
    case collBxor: return a ^ b;
    default: return a + b;
  }
}

void tile(void* dst, const std::vector<uint8_t>& period, size_t es, size_t count, size_t first) {
  auto out = static_cast<uint8_t*>(dst);
  size_t pos = first % kPeriod;
  while (count > 0) {
    size_t n = std::min(count, kPeriod - pos);
    std::memcpy(out, period.data() + pos * es, n * es);
    out += n * es;
    count -= n;
    pos = 0;
  }
}

}  // namespace

ReducePattern::ReducePattern(collDataType_t dt, collRedOp_t op, int nranks, uint32_t salt)
    : dt_(dt), es_(collTypeSize(dt)), inputs_(nranks), expected_(kPeriod * es_) {
  bool sgn = isSigned(dt);
  for (int r = 0; r < nranks; ++r) inputs_[r].resize(kPeriod * es_);
  for (size_t i = 0; i < kPeriod; ++i) {
    int64_t acc = 0;
    for (int r = 0; r < nranks; ++r) {
      int64_t v = inputValue(op, sgn, r, nranks, i, salt);
      storeValue(inputs_[r].data(), i, dt, static_cast<double>(v));
      acc = r == 0 ? v : combine(op, acc, v);
    }
    if (op == collAvg) acc /= nranks;  // exact by construction
    storeValue(expected_.data(), i, dt, static_cast<double>(acc));
  }
}

void ReducePattern::fillInput(void* buf, size_t count, int rank, size_t first) const {
  tile(buf, inputs_.at(rank), es_, count, first);
}

void ReducePattern::fillExpected(void* buf, size_t count, size_t first) const {
  tile(buf, expected_, es_, count, first);
}

double payloadValue(collDataType_t dt, uint64_t tag, size_t k) {
  int64_t v = mix(tag, k) % 101;  // exact in every type, int8 included
  return static_cast<double>(isSigned(dt) ? v - 50 : v);
}

void fillPayload(void* buf, size_t count, collDataType_t dt, uint64_t tag) {
  for (size_t k = 0; k < count; ++k) storeValue(buf, k, dt, payloadValue(dt, tag, k));
}

std::vector<size_t> testCounts(const Ctx& ctx, collDataType_t dt, int split, unsigned rotation) {
  // 1001 = 7*11*13 is odd and leaves 2 when divided by 3; 13 is prime.
  std::vector<size_t> counts = {0, 1, 13, 1001};
  if (!ctx.quick) counts.push_back(((size_t{1} << 20) / collTypeSize(dt) + 3) / split);
  if (ctx.sample) return {counts[rotation % counts.size()]};
  return counts;
}

}  // namespace mp
