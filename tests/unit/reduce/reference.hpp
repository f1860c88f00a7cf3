// Slow, obviously-correct references for the reduction kernels: small IEEE-style
// formats are decoded and encoded through double with frexp/ldexp/nearbyint, so they
// share no code or bit tricks with src/base/reduce.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

namespace reftest {

// A binary floating-point format with `ebits` exponent and `mbits` fraction bits.
struct Format {
  int ebits;
  int mbits;
  int bias() const { return (1 << (ebits - 1)) - 1; }
  uint32_t expMask() const { return ((1u << ebits) - 1) << mbits; }
  uint32_t signBit() const { return 1u << (ebits + mbits); }
};
constexpr Format kHalf{5, 10};
constexpr Format kBf16{8, 7};

inline bool isNanBits(uint32_t bits, Format f) {
  return (bits & f.expMask()) == f.expMask() && (bits & ((1u << f.mbits) - 1)) != 0;
}

inline double decode(uint32_t bits, Format f) {
  const uint32_t mant = bits & ((1u << f.mbits) - 1);
  const int exp = static_cast<int>((bits & f.expMask()) >> f.mbits);
  const double sign = (bits & f.signBit()) ? -1.0 : 1.0;
  if (exp == (1 << f.ebits) - 1)
    return mant ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), 1 - f.bias() - f.mbits);
  return sign * std::ldexp(static_cast<double>(mant + (1u << f.mbits)), exp - f.bias() - f.mbits);
}

// Round to nearest even; overflow to Inf. NaN handling is the caller's business.
inline uint32_t encode(double v, Format f) {
  const uint32_t sign = std::signbit(v) ? f.signBit() : 0;
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | f.expMask();
  const int emin = 1 - f.bias();
  int e = 0;
  std::frexp(a, &e);
  int lead = a == 0 ? emin : std::max(e - 1, emin);  // exponent of the leading bit
  int q = lead - f.mbits;                              // exponent of the last kept bit
  double r = std::nearbyint(std::ldexp(a, -q));        // ties to even (default mode)
  if (r >= std::ldexp(1.0, f.mbits + 1)) {             // rounded up to the next binade
    r /= 2;
    ++q;
  }
  lead = q + f.mbits;
  if (r < std::ldexp(1.0, f.mbits)) return sign | static_cast<uint32_t>(r);  // subnormal
  const int field = lead + f.bias();
  if (field >= (1 << f.ebits) - 1) return sign | f.expMask();
  return sign | (static_cast<uint32_t>(field) << f.mbits) |
         (static_cast<uint32_t>(r) - (1u << f.mbits));
}

template <typename To, typename From>
To bits(From x) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &x, sizeof t);
  return t;
}

// Random values of type T (as stored: 16-bit floats as uint16_t bit patterns) mixing
// ordinary numbers of both signs with the edge cases of the type.
template <typename T>
std::vector<T> randomValues(size_t n, uint32_t seed, bool is16BitFloat = false) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    if constexpr (std::is_floating_point_v<T>) {
      const T specials[] = {T(0), -T(0), INFINITY, -INFINITY, std::numeric_limits<T>::quiet_NaN(),
                            -std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::denorm_min(),
                            std::numeric_limits<T>::max(), std::numeric_limits<T>::lowest(), T(1)};
      if (r % 8 == 0) {
        v[i] = specials[(r >> 8) % 10];
      } else if (r % 8 == 1) {  // any bit pattern: NaN payloads, subnormals, huge values
        using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
        v[i] = bits<T>(static_cast<U>(r >> 3));
      } else {
        const double mag = std::ldexp(static_cast<double>((r >> 12) % 100000) / 1000.0,
                                      static_cast<int>((r >> 40) % 40) - 20);
        v[i] = static_cast<T>((r & 4) ? -mag : mag);
      }
    } else if (is16BitFloat) {
      v[i] = static_cast<T>(r >> 20);  // every pattern, NaN/Inf/subnormal included
    } else {
      const T specials[] = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(0),
                            T(1), static_cast<T>(-1)};
      v[i] = (r % 8 == 0) ? specials[(r >> 8) % 5] : static_cast<T>(r >> 7);
    }
  }
  return v;
}

}  // namespace reftest
