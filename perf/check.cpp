#include "check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace perf {
namespace {

uint32_t floatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

float bitsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

// Drops `shift` low bits of m, rounding to nearest with ties to even.
uint32_t shiftRoundEven(uint32_t m, int shift) {
  if (shift <= 0) return m;
  if (shift > 31) return 0;
  uint32_t kept = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (kept & 1u))) ++kept;
  return kept;
}

template <typename T>
T read(const void* buf, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void write(void* buf, size_t i, T v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

bool isFloating(collDataType_t dt) { return isFloatingType(dt); }

// The largest n such that every integer in [0, n] is exact in dt (integer types wrap
// exactly, so they have no such limit for our purpose).
int64_t exactIntegerLimit(collDataType_t dt) {
  switch (dt) {
    case collBfloat16: return 256;
    case collHalf: return 2048;
    case collFloat: return int64_t{1} << 24;
    default: return int64_t{1} << 53;
  }
}

double epsilon(collDataType_t dt) {
  switch (dt) {
    case collHalf: return std::ldexp(1.0, -10);
    case collBfloat16: return std::ldexp(1.0, -7);
    case collFloat: return std::ldexp(1.0, -23);
    default: return std::ldexp(1.0, -52);
  }
}

}  // namespace

uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return sign | 0x7e00u;  // NaN
  int exp = static_cast<int>(absx >> 23) - 127;
  uint32_t mant = absx & 0x7fffffu;
  if (exp > 15) return sign | 0x7c00u;  // overflow (and inf)
  if (exp >= -14) {
    // Normal: a carry out of the mantissa rightly bumps the exponent, up to inf.
    uint32_t h = (static_cast<uint32_t>(exp + 15) << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  if (absx == 0) return sign;
  // Subnormal half: units of 2^-24; the float's implicit bit becomes explicit.
  uint32_t m = mant | (exp >= -126 ? 0x800000u : 0u);
  int shift = (-14 - exp) + 13;
  return static_cast<uint16_t>(sign | shiftRoundEven(m, shift));
}

float halfToFloat(uint16_t h) {
  float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31) return mant ? std::nanf("") : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(1024 + mant), exp - 25);
}

uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bf16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

double loadValue(const void* buf, size_t i, collDataType_t dt) {
  switch (dt) {
    case collInt8: return read<int8_t>(buf, i);
    case collUint8: return read<uint8_t>(buf, i);
    case collInt32: return read<int32_t>(buf, i);
    case collUint32: return read<uint32_t>(buf, i);
    case collInt64: return static_cast<double>(read<int64_t>(buf, i));
    case collUint64: return static_cast<double>(read<uint64_t>(buf, i));
    case collHalf: return halfToFloat(read<uint16_t>(buf, i));
    case collFloat: return read<float>(buf, i);
    case collDouble: return read<double>(buf, i);
    case collBfloat16: return bf16ToFloat(read<uint16_t>(buf, i));
    case collInt16: return read<int16_t>(buf, i);
    case collUint16: return read<uint16_t>(buf, i);
    default: return NAN;
  }
}

void storeValue(void* buf, size_t i, collDataType_t dt, double v) {
  // Integers go through int64 so that out-of-range values wrap (C++20 defines it).
  int64_t iv = isFloating(dt) ? 0 : static_cast<int64_t>(v);
  switch (dt) {
    case collInt8: write(buf, i, static_cast<int8_t>(iv)); break;
    case collUint8: write(buf, i, static_cast<uint8_t>(iv)); break;
    case collInt32: write(buf, i, static_cast<int32_t>(iv)); break;
    case collUint32: write(buf, i, static_cast<uint32_t>(iv)); break;
    case collInt64: write(buf, i, iv); break;
    case collUint64: write(buf, i, static_cast<uint64_t>(iv)); break;
    case collHalf: write(buf, i, floatToHalf(static_cast<float>(v))); break;
    case collFloat: write(buf, i, static_cast<float>(v)); break;
    case collDouble: write(buf, i, v); break;
    case collBfloat16: write(buf, i, floatToBf16(static_cast<float>(v))); break;
    case collInt16: write(buf, i, static_cast<int16_t>(iv)); break;
    case collUint16: write(buf, i, static_cast<uint16_t>(iv)); break;
    default: break;
  }
}

double roundToType(double v, collDataType_t dt) {
  alignas(8) unsigned char tmp[8];
  storeValue(tmp, 0, dt, v);
  return loadValue(tmp, 0, dt);
}

Pattern::Pattern(collDataType_t dt, collRedOp_t op, int nranks)
    : dt_(dt), op_(plainOp(op)), nranks_(std::max(1, nranks)) {
  op = op_;
  constexpr int64_t kMaxRange = 100;  // exact in every type, int8 included
  range_ = kMaxRange;
  if (op == collSum || op == collAvg) {
    // n * (range - 1) must stay exact: the largest possible sum.
    range_ = std::clamp<int64_t>(exactIntegerLimit(dt) / nranks_ + 1, 2, kMaxRange);
  }
}

int64_t Pattern::value(int rank, size_t elem) const {
  if (op_ == collProd) {
    // Powers of two only, at most 2^ceil(n/3) after the product: exact in half for n <= 45.
    return (static_cast<size_t>(rank) + elem) % 3 == 0 ? 2 : 1;
  }
  return static_cast<int64_t>(((elem % static_cast<size_t>(range_)) * 7 +
                               static_cast<size_t>(rank) * 37) % static_cast<size_t>(range_));
}

double Pattern::reduced(size_t elem) const {
  int64_t acc = value(0, elem);
  for (int r = 1; r < nranks_; ++r) {
    int64_t v = value(r, elem);
    switch (op_) {
      case collProd: acc *= v; break;
      case collMax: acc = std::max(acc, v); break;
      case collMin: acc = std::min(acc, v); break;
      case collBand: acc &= v; break;
      case collBor: acc |= v; break;
      case collBxor: acc ^= v; break;
      default: acc += v; break;
    }
  }
  if (op_ == kNoOp) return roundToType(static_cast<double>(value(0, elem)), dt_);
  double wrapped = roundToType(static_cast<double>(acc), dt_);
  if (op_ != collAvg) return wrapped;
  if (isFloating(dt_)) return roundToType(static_cast<double>(acc) / nranks_, dt_);
  // Integer avg: the wrapped sum divided once, truncating toward zero.
  return static_cast<double>(static_cast<int64_t>(wrapped) / nranks_);
}

bool Pattern::matches(double got, double expected) const {
  if (op_ == collAvg && isFloating(dt_)) {
    double tol = nranks_ * epsilon(dt_) * std::max(1.0, std::fabs(expected));
    return std::fabs(got - expected) <= tol;  // false for NaN
  }
  return got == expected;
}

void fillInput(void* buf, size_t count, const Pattern& p, int rank) {
  for (size_t j = 0; j < count; ++j)
    storeValue(buf, j, p.type(), static_cast<double>(p.value(rank, j)));
}

bool outputDefined(Coll c, int rank, int root) {
  return (c != Coll::Reduce && c != Coll::Gather) || rank == root;
}

double expectedOutput(Coll c, const Pattern& p, const Counts& k, int nranks, int rank,
                      int root, size_t i) {
  size_t pc = k.paramCount;
  int64_t v = 0;
  switch (c) {
    case Coll::AllReduce:
    case Coll::Reduce: return p.reduced(i);
    case Coll::ReduceScatter: return p.reduced(static_cast<size_t>(rank) * pc + i);
    case Coll::Broadcast: v = p.value(root, i); break;
    case Coll::AllGather:
    case Coll::Gather:
    case Coll::HyperCube: v = p.value(static_cast<int>(i / pc), i % pc); break;
    case Coll::Scatter: v = p.value(root, static_cast<size_t>(rank) * pc + i); break;
    case Coll::AllToAll:
      v = p.value(static_cast<int>(i / pc), static_cast<size_t>(rank) * pc + i % pc);
      break;
    case Coll::SendRecv: v = p.value((rank - 1 + nranks) % nranks, i); break;
  }
  return roundToType(static_cast<double>(v), p.type());
}

size_t countWrong(Coll c, const Pattern& p, const Counts& k, int nranks, int rank, int root,
                  const void* out) {
  if (!outputDefined(c, rank, root)) return 0;
  size_t wrong = 0;
  for (size_t i = 0; i < k.recvCount; ++i) {
    double expected = expectedOutput(c, p, k, nranks, rank, root, i);
    if (!p.matches(loadValue(out, i, p.type()), expected)) ++wrong;
  }
  return wrong;
}

}  // namespace perf
