#include "engine/fusion_buffer.hpp"

#include <cstring>

#include "base/error.hpp"

namespace coll::engine {

void* FusionBuffers::get(BufferSlot slot, size_t bytes) {
  Buffer& b = bufs_[static_cast<int>(slot)];
  if (bytes <= b.size && b.mem) return b.mem.get();
  size_t size = (bytes + 63) / 64 * 64;
  if (size == 0) size = 64;
  void* p = std::aligned_alloc(64, size);
  if (!p) COLL_THROW(collSystemError, "fusion buffer: cannot allocate ", size, " bytes");
  b.mem.reset(p);
  b.size = size;
  return p;
}

std::shared_ptr<const void> FusionBuffers::zeros(size_t bytes) {
  if (zeros_ && bytes <= zerosSize_) return zeros_;
  size_t size = (bytes + 63) / 64 * 64;
  if (size == 0) size = 64;
  void* p = std::aligned_alloc(64, size);
  if (!p) COLL_THROW(collSystemError, "fusion buffer: cannot allocate ", size, " bytes of zeros");
  std::memset(p, 0, size);
  zeros_ = std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  zerosSize_ = size;
  return zeros_;
}

size_t FusionBuffers::capacity(BufferSlot slot) const { return bufs_[static_cast<int>(slot)].size; }

size_t FusionBuffers::totalBytes() const {
  size_t t = 0;
  for (const auto& b : bufs_) t += b.size;
  return t + zerosSize_;
}

}  // namespace coll::engine
