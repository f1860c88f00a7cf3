// A deliberately small tensor: float32, contiguous, row-major, reference-counted storage.
//
// Copies of a Tensor share storage (like torch.Tensor); clone() makes a deep copy. The
// device field is there so that the same layer code can later hold CUDA buffers; today
// only CPU storage can be allocated and anything else is rejected at construction.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace collective::frontend {

enum class Device { CPU, CUDA };

using Shape = std::vector<int64_t>;

std::string shapeString(const Shape& shape);
int64_t shapeNumel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled storage of the given shape.
  explicit Tensor(Shape shape, Device device = Device::CPU);
  static Tensor fromVector(Shape shape, const std::vector<float>& values);
  // A tensor over storage allocated elsewhere, e.g. a view into one larger buffer made
  // with shared_ptr's aliasing constructor (the buffer then lives while any view does).
  static Tensor wrap(std::shared_ptr<float[]> storage, Shape shape);

  bool defined() const { return storage_ != nullptr; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const;
  size_t ndim() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * sizeof(float); }

  float* data() { return storage_.get(); }
  const float* data() const { return storage_.get(); }
  std::span<float> span() { return {data(), static_cast<size_t>(numel_)}; }
  std::span<const float> span() const { return {data(), static_cast<size_t>(numel_)}; }
  float& operator[](int64_t i) { return storage_[i]; }
  float operator[](int64_t i) const { return storage_[i]; }

  // A view with another shape over the same storage (numel must match).
  Tensor reshape(Shape shape) const;
  Tensor clone() const;
  void fill(float value);
  void zero() { fill(0.0f); }
  void copyFrom(const Tensor& other);  // same numel
  std::vector<float> toVector() const;

  // Number of Tensor objects sharing this storage; layers reuse a cached buffer only
  // when nobody else still holds it.
  long useCount() const { return storage_.use_count(); }

 private:
  std::shared_ptr<float[]> storage_;
  Shape shape_;
  int64_t numel_ = 0;
  Device device_ = Device::CPU;
};

// Returns `buf` when it already has `shape` and is held by nobody else, else a fresh
// zero-filled tensor. Contents of a reused buffer are stale: callers overwrite them.
Tensor& ensureBuffer(Tensor& buf, const Shape& shape);

}  // namespace collective::frontend
