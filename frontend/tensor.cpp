#include "tensor.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <sstream>

#include "base/error.hpp"

namespace collective::frontend {

namespace {

// 64-byte alignment keeps OpenBLAS and the compiler's vector loops on their fast paths.
constexpr size_t kAlign = 64;

std::shared_ptr<float[]> allocate(int64_t numel) {
  size_t bytes = std::max<size_t>(static_cast<size_t>(numel) * sizeof(float), kAlign);
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  auto* p = static_cast<float*>(::operator new[](bytes, std::align_val_t(kAlign)));
  std::memset(p, 0, bytes);
  return std::shared_ptr<float[]>(
      p, [](float* q) { ::operator delete[](q, std::align_val_t(kAlign)); });
}

}  // namespace

std::string shapeString(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

int64_t shapeNumel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    COLL_CHECK_ARG(d >= 0, "tensor shape ", shapeString(shape), " has a negative dimension");
    n *= d;
  }
  return n;
}

Tensor::Tensor(Shape shape, Device device) : shape_(std::move(shape)), device_(device) {
  COLL_CHECK_ARG(device == Device::CPU,
                 "Tensor: device CUDA requested but the frontend allocates CPU storage only");
  numel_ = shapeNumel(shape_);
  storage_ = allocate(numel_);
}

Tensor Tensor::fromVector(Shape shape, const std::vector<float>& values) {
  Tensor t(std::move(shape));
  COLL_CHECK_ARG(static_cast<int64_t>(values.size()) == t.numel(),
                 "Tensor::fromVector: ", values.size(), " values for shape ",
                 shapeString(t.shape()));
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

Tensor Tensor::wrap(std::shared_ptr<float[]> storage, Shape shape) {
  Tensor t;
  t.numel_ = shapeNumel(shape);
  COLL_CHECK_ARG(storage != nullptr || t.numel_ == 0, "Tensor::wrap: no storage for shape ",
                 shapeString(shape));
  t.shape_ = std::move(shape);
  t.storage_ = std::move(storage);
  return t;
}

int64_t Tensor::dim(size_t i) const {
  COLL_CHECK_ARG(i < shape_.size(), "Tensor::dim(", i, ") on a tensor of shape ",
                 shapeString(shape_));
  return shape_[i];
}

Tensor Tensor::reshape(Shape shape) const {
  COLL_CHECK_ARG(shapeNumel(shape) == numel_, "Tensor::reshape from ", shapeString(shape_), " to ",
                 shapeString(shape), ": element counts differ");
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(shape_, device_);
  if (numel_) std::memcpy(t.data(), data(), bytes());
  return t;
}

void Tensor::fill(float value) { std::fill_n(data(), numel_, value); }

void Tensor::copyFrom(const Tensor& other) {
  COLL_CHECK_ARG(other.numel() == numel_, "Tensor::copyFrom: source has ", other.numel(),
                 " elements, destination ", numel_);
  if (numel_ && other.data() != data()) std::memcpy(data(), other.data(), bytes());
}

std::vector<float> Tensor::toVector() const { return {data(), data() + numel_}; }

Tensor& ensureBuffer(Tensor& buf, const Shape& shape) {
  if (!buf.defined() || buf.useCount() > 1 || buf.shape() != shape) {
    if (buf.defined() && buf.useCount() == 1 && buf.numel() == shapeNumel(shape))
      buf = buf.reshape(shape);
    else
      buf = Tensor(shape);
  }
  return buf;
}

}  // namespace collective::frontend
