#include "mp_util.hpp"

#include <cmath>
#include <cstring>

namespace mp {

const char* typeName(collDataType_t dt) {
  switch (dt) {
    case collInt8: return "int8";
    case collUint8: return "uint8";
    case collInt16: return "int16";
    case collUint16: return "uint16";
    case collInt32: return "int32";
    case collUint32: return "uint32";
    case collInt64: return "int64";
    case collUint64: return "uint64";
    case collFloat16: return "float16";
    case collFloat32: return "float32";
    case collFloat64: return "float64";
    case collBfloat16: return "bfloat16";
    default: return "?";
  }
}

const char* opName(collRedOp_t op) {
  switch (op) {
    case collSum: return "sum";
    case collProd: return "prod";
    case collMax: return "max";
    case collMin: return "min";
    case collAvg: return "avg";
    case collBand: return "band";
    case collBor: return "bor";
    case collBxor: return "bxor";
    default: return "?";
  }
}

bool isFloat(collDataType_t dt) {
  return dt == collFloat16 || dt == collFloat32 || dt == collFloat64 || dt == collBfloat16;
}

bool isSigned(collDataType_t dt) {
  return isFloat(dt) || dt == collInt8 || dt == collInt16 || dt == collInt32 || dt == collInt64;
}

// IEEE binary16 with round-to-nearest-even, NaN kept quiet, overflow to infinity.
uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  if ((x & 0x7fffffff) > 0x7f800000) return sign | 0x7e00;
  int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (exp >= 31) return sign | 0x7c00;
  if (exp <= 0) {  // subnormal (or zero) in half precision
    if (exp < -10) return sign;
    mant |= 0x800000;
    int shift = 14 - exp;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13), rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // a carry may round up to infinity
  return static_cast<uint16_t>(sign | h);
}

float halfToFloat(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return (h & 0x8000) ? -v : v;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

float bf16ToFloat(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

void storeValue(void* buf, size_t i, collDataType_t dt, double v) {
  auto w = static_cast<int64_t>(v);  // integer types: wrap from 64 bits, as C casts do
  switch (dt) {
    case collInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(w); break;
    case collUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(w); break;
    case collInt16: static_cast<int16_t*>(buf)[i] = static_cast<int16_t>(w); break;
    case collUint16: static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(w); break;
    case collInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(w); break;
    case collUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(w); break;
    case collInt64: static_cast<int64_t*>(buf)[i] = w; break;
    case collUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(w); break;
    case collFloat16: static_cast<uint16_t*>(buf)[i] = floatToHalf(static_cast<float>(v)); break;
    case collBfloat16: static_cast<uint16_t*>(buf)[i] = floatToBf16(static_cast<float>(v)); break;
    case collFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case collFloat64: static_cast<double*>(buf)[i] = v; break;
    default: throw Failure(cat("storeValue: bad type ", static_cast<int>(dt)));
  }
}

double loadValue(const void* buf, size_t i, collDataType_t dt) {
  switch (dt) {
    case collInt8: return static_cast<const int8_t*>(buf)[i];
    case collUint8: return static_cast<const uint8_t*>(buf)[i];
    case collInt16: return static_cast<const int16_t*>(buf)[i];
    case collUint16: return static_cast<const uint16_t*>(buf)[i];
    case collInt32: return static_cast<const int32_t*>(buf)[i];
    case collUint32: return static_cast<const uint32_t*>(buf)[i];
    case collInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case collUint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case collFloat16: return halfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case collBfloat16: return bf16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case collFloat32: return static_cast<const float*>(buf)[i];
    case collFloat64: return static_cast<const double*>(buf)[i];
    default: return 0;
  }
}

void checkResult(collResult_t rc, const char* call, collComm_t comm) {
  if (rc == collSuccess) return;
  throw Failure(cat(call, " returned ", collGetErrorString(rc), " (", static_cast<int>(rc),
                    "): ", collGetLastError(comm)));
}

void expectEqual(const std::string& what, const void* want, const void* got, size_t count,
                 collDataType_t dt) {
  size_t es = collTypeSize(dt);
  auto w = static_cast<const uint8_t*>(want);
  auto g = static_cast<const uint8_t*>(got);
  if (count == 0 || std::memcmp(w, g, count * es) == 0) return;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(w + i * es, g + i * es, es) == 0) continue;
    size_t bad = 0;
    for (size_t j = i; j < count; ++j) bad += std::memcmp(w + j * es, g + j * es, es) != 0;
    throw Failure(cat("MISMATCH ", what, ": element ", i, " of ", count, " is ",
                      loadValue(got, i, dt), ", expected ", loadValue(want, i, dt), " (", bad,
                      " elements differ)"));
  }
}

uint64_t fingerprint(const void* data, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

void expectSameOnAllRanks(Ctx& ctx, const std::string& what, const void* buf, size_t bytes) {
  uint64_t mine = fingerprint(buf, bytes);
  std::vector<uint64_t> all(ctx.nranks, 0);
  MP_CALL(ctx, collAllGather(&mine, all.data(), 1, collUint64, ctx.comm, nullptr));
  for (int r = 0; r < ctx.nranks; ++r)
    if (all[r] != mine)
      throw Failure(cat("MISMATCH ", what, ": result differs between ranks (rank ", ctx.rank,
                        " has fingerprint ", std::hex, mine, ", rank ", std::dec, r, " has ",
                        std::hex, all[r], ")"));
  ++ctx.checks;
}

uint32_t mix(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return static_cast<uint32_t>(h);
}

}  // namespace mp
