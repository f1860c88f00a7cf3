#include "engine/fusion_buffer.hpp"

#include <cstring>

#include "core/error.hpp"

namespace coll::engine {

void* FusionBuffers::get(BufferSlot slot, size_t bytes) {
  Buffer& b = bufs_[static_cast<int>(slot)];
  if (bytes <= b.size && b.mem) return b.mem.get();
  size_t size = (bytes + 63) / 64 * 64;
  if (size == 0) size = 64;
  void* p = std::aligned_alloc(64, size);
  if (!p) COLL_THROW(collSystemError, "fusion buffer: cannot allocate ", size, " bytes");
  if (slot == BufferSlot::Zeros) std::memset(p, 0, size);
  b.mem.reset(p);
  b.size = size;
  return p;
}

size_t FusionBuffers::capacity(BufferSlot slot) const { return bufs_[static_cast<int>(slot)].size; }

size_t FusionBuffers::totalBytes() const {
  size_t t = 0;
  for (const auto& b : bufs_) t += b.size;
  return t;
}

}  // namespace coll::engine
