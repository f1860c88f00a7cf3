// collective::SharedArray<T>: n elements of collMemAlloc memory (header-only).
//
//   collective::SharedArray<float> grad(n);                // zero-filled
//   comm.allReduce(grad.span(), collective::Op::Sum);
//
// Same-host ranks in other processes copy such buffers through mappings of their own
// instead of through the kernel, so large collectives on them move fewer bytes (see
// collMemAlloc in collective.h). Move-only; the memory is freed with the object.
#pragma once

#if !defined(__cplusplus) || __cplusplus <= 201703L
#error "<collective/memory.hpp> needs C++20 (-std=c++20); C and older C++ can use <collective.h>"
#endif

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "collective.h"
#include "collective/error.hpp"

namespace collective {

template <typename T>
class SharedArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_default_constructible_v<T>,
                "SharedArray holds plain data: the memory is zero-filled, never constructed");

 public:
  explicit SharedArray(size_t n) : n_(n) {
    if (n == 0) return;
    if (n > static_cast<size_t>(-1) / sizeof(T))
      detail::invalidArgument("SharedArray", std::to_string(n) + " elements do not fit in memory");
    void* p = nullptr;
    detail::check(collMemAlloc(&p, n * sizeof(T)), "collMemAlloc");
    data_ = static_cast<T*>(p);
  }
  SharedArray(SharedArray&& o) noexcept : data_(std::exchange(o.data_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  SharedArray& operator=(SharedArray&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  SharedArray(const SharedArray&) = delete;
  SharedArray& operator=(const SharedArray&) = delete;
  ~SharedArray() { reset(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  std::span<T> span() { return {data_, n_}; }
  std::span<const T> span() const { return {data_, n_}; }
  T* begin() { return data_; }
  T* end() { return data_ + n_; }

 private:
  void reset() {
    if (data_) (void)collMemFree(data_);  // cannot fail for memory collMemAlloc returned
    data_ = nullptr;
    n_ = 0;
  }
  T* data_ = nullptr;
  size_t n_ = 0;
};

}  // namespace collective
