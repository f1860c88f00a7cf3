// Helpers for the multi-process test programs. They use only the public C API
// (include/collective.h), like a user's program would, so they carry their own
// float16/bfloat16 conversions instead of reaching into the library's.
#pragma once

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "collective.h"

namespace mp {

// A check failed: the message names the collective, type, op, count and element.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The rank's view of the job, shared by every test phase.
struct Ctx {
  collComm_t comm = nullptr;
  int rank = 0;
  int nranks = 1;
  bool quick = false;   // no 1 MiB cases (hand-started and netns jobs)
  bool sample = false;  // each case at one of the counts, in rotation, instead of at all
  long checks = 0;      // number of results verified, printed at the end
  uint64_t resultsFingerprint = 0;  // of every all-reduce result, compared across ranks once
};

constexpr collDataType_t kTypes[] = {collInt8,    collUint8,   collInt16,   collUint16,
                                     collInt32,   collUint32,  collInt64,   collUint64,
                                     collFloat16, collFloat32, collFloat64, collBfloat16};
// The arithmetic reductions, which every type takes; the bitwise ones take integers only.
constexpr collRedOp_t kOps[] = {collSum, collProd, collMax, collMin, collAvg};
constexpr collRedOp_t kBitwiseOps[] = {collBand, collBor, collBxor};

const char* typeName(collDataType_t dt);
const char* opName(collRedOp_t op);
bool isSigned(collDataType_t dt);  // floats count as signed
bool isFloat(collDataType_t dt);

uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
uint16_t floatToBf16(float f);
float bf16ToFloat(uint16_t h);

// Element i of buf as type dt; integers wrap to the type's width like C casts do.
void storeValue(void* buf, size_t i, collDataType_t dt, double v);
double loadValue(const void* buf, size_t i, collDataType_t dt);

// Throws Failure with the library's own explanation when rc is not collSuccess.
void checkResult(collResult_t rc, const char* call, collComm_t comm);
#define MP_CALL(ctx, expr) ::mp::checkResult((expr), #expr, (ctx).comm)

// Builds a message from the pieces (printf-free, so any streamable value fits).
template <typename... A>
std::string cat(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

// Compares want and got element by element, bit for bit; throws on the first difference.
void expectEqual(const std::string& what, const void* want, const void* got, size_t count,
                 collDataType_t dt);

// FNV-1a over bytes: a fingerprint of a result that ranks can compare cheaply.
uint64_t fingerprint(const void* data, size_t bytes);
// All-gathers each rank's fingerprint of buf and throws if any rank differs.
void expectSameOnAllRanks(Ctx& ctx, const std::string& what, const void* buf, size_t bytes);

// A 32-bit mix of the arguments, for test data that differs per element and per test.
uint32_t mix(uint64_t a, uint64_t b);

// Test phases, one per source file.
void runReductionTests(Ctx& ctx);
void runFloatAgreementTests(Ctx& ctx);
void runMovementTests(Ctx& ctx);
void runPointToPointTests(Ctx& ctx);
void runCommTests(Ctx& ctx);

}  // namespace mp

