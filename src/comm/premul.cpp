#include "comm/premul.hpp"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "comm/comm.hpp"
#include "base/error.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

// Scratch slot of the scaled input; the algorithms' own slots are below it.
constexpr int kPreMulSlot = 15;

template <typename T>
void scaleInt(void* dst, const void* src, size_t n, const void* scalar) {
  // In the unsigned type: wraps like the sums do, where signed overflow would be undefined.
  using U = std::make_unsigned_t<T>;
  U k;
  memcpy(&k, scalar, sizeof k);
  const U* s = static_cast<const U*>(src);
  U* d = static_cast<U*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<U>(s[i] * k);
}

template <typename T>
void scaleFloat(void* dst, const void* src, size_t n, const void* scalar) {
  T k;
  memcpy(&k, scalar, sizeof k);
  const T* s = static_cast<const T*>(src);
  T* d = static_cast<T*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = s[i] * k;
}

// The product of two 11-bit (8-bit for bfloat16) significands fits float's 24 bits, so the
// float product is exact and the one rounding back gives the correctly rounded product.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void scale16(void* dst, const void* src, size_t n, const void* scalar) {
  uint16_t kb;
  memcpy(&kb, scalar, sizeof kb);
  const float k = Widen(kb);
  const uint16_t* s = static_cast<const uint16_t*>(src);
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = Narrow(Widen(s[i]) * k);
}

}  // namespace

void scaleBuffer(void* dst, const void* src, size_t count, collDataType_t dt, const void* scalar) {
  switch (dt) {
    case collInt8: return scaleInt<int8_t>(dst, src, count, scalar);
    case collUint8: return scaleInt<uint8_t>(dst, src, count, scalar);
    case collInt32: return scaleInt<int32_t>(dst, src, count, scalar);
    case collUint32: return scaleInt<uint32_t>(dst, src, count, scalar);
    case collInt64: return scaleInt<int64_t>(dst, src, count, scalar);
    case collUint64: return scaleInt<uint64_t>(dst, src, count, scalar);
    case collInt16: return scaleInt<int16_t>(dst, src, count, scalar);
    case collUint16: return scaleInt<uint16_t>(dst, src, count, scalar);
    case collFloat16: return scale16<halfToFloat, floatToHalf>(dst, src, count, scalar);
    case collBfloat16: return scale16<bf16ToFloat, floatToBf16>(dst, src, count, scalar);
    case collFloat32: return scaleFloat<float>(dst, src, count, scalar);
    case collFloat64: return scaleFloat<double>(dst, src, count, scalar);
    default: COLL_THROW(collInvalidArgument, "scaleBuffer: invalid datatype ", static_cast<int>(dt));
  }
}

OpArgs stagePreMul(Comm& comm, const OpArgs& op) {
  OpArgs sum = op;
  sum.preMul = false;
  sum.op = collSum;
  const size_t es = typeSize(op.dtype);
  // A reduce-scatter's input is nranks blocks; the output holds one of them only.
  const size_t inCount = op.kind == OpKind::ReduceScatter ? op.count * comm.nranks() : op.count;
  const bool intoOutput = op.kind == OpKind::AllReduce || (op.kind == OpKind::Reduce && comm.rank() == op.root);
  void* scaled = intoOutput ? op.recvbuf : comm.scratch(inCount * es, kPreMulSlot);
  scaleBuffer(scaled, op.sendbuf, inCount, op.dtype, op.scalar);
  sum.sendbuf = scaled;
  if (intoOutput) sum.recvbuf = scaled;
  return sum;
}

}  // namespace coll
