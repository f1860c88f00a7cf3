// Element types and reduction ops for the C++ API.
//
// The data type of a collective is deduced from the span's element type:
//   int8_t/uint8_t/int16_t/uint16_t/int32_t/uint32_t/int64_t/uint64_t (any integer type of those sizes,
//   bool excepted), float, double, and the 16-bit storage types collective::half
//   (IEEE binary16) and collective::bfloat16. Anything else does not compile.
#pragma once

#if !defined(__cplusplus) || __cplusplus <= 201703L
#error "<collective/types.hpp> needs C++20 (-std=c++20); C and older C++ can use <collective.h>"
#endif

#include <cstdint>
#include <type_traits>

#include "collective.h"

namespace collective {

// 16-bit floats as raw bits: the library reduces them; converting them is the caller's
// business (frameworks have their own half types of the same layout).
struct half {
  uint16_t bits = 0;
};
struct bfloat16 {
  uint16_t bits = 0;
};
static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);

// Also holds the ops made on a communicator (PreMulSum, collective/communicator.hpp).
enum class Op : int {
  Sum = collSum,
  Prod = collProd,
  Max = collMax,
  Min = collMin,
  Avg = collAvg,  // sum, then divided by the number of ranks (integers: truncating)
  Band = collBand,  // bitwise and, or, exclusive or: integer types only
  Bor = collBor,
  Bxor = collBxor,
};

constexpr collRedOp_t toC(Op op) { return static_cast<collRedOp_t>(op); }

namespace detail {

template <typename T>
constexpr collDataType_t typeFor() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, half>) return collFloat16;
  else if constexpr (std::is_same_v<U, bfloat16>) return collBfloat16;
  else if constexpr (std::is_same_v<U, float>) return collFloat32;
  else if constexpr (std::is_same_v<U, double>) return collFloat64;
  else if constexpr (std::is_integral_v<U> && !std::is_same_v<U, bool>) {
    constexpr bool s = std::is_signed_v<U>;
    if constexpr (sizeof(U) == 1) return s ? collInt8 : collUint8;
    else if constexpr (sizeof(U) == 2) return s ? collInt16 : collUint16;
    else if constexpr (sizeof(U) == 4) return s ? collInt32 : collUint32;
    else if constexpr (sizeof(U) == 8) return s ? collInt64 : collUint64;
    else return collNumTypes;
  } else {
    return collNumTypes;
  }
}

}  // namespace detail

// A type the library can reduce and move: see the list at the top of this file.
template <typename T>
concept Element = detail::typeFor<T>() != collNumTypes;

template <Element T>
inline constexpr collDataType_t dataTypeOf = detail::typeFor<T>();

}  // namespace collective
