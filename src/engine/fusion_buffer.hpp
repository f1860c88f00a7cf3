// Fusion buffer storage: a few host staging buffers per engine, reused round after
// round and grown on demand (the first steps of training pay for the allocation once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace coll::engine {

// Fused and FusedAlt let two fused allreduces be in flight at once (one being copied
// while the other is on the wire).
enum class BufferSlot : int { Fused = 0, FusedAlt = 1, Send = 2, Recv = 3, Scratch = 4, Zeros = 5, kCount = 6 };

class FusionBuffers {
 public:
  // At least `bytes` bytes, 64-byte aligned; contents are undefined except for
  // BufferSlot::Zeros, which is all zero.
  void* get(BufferSlot slot, size_t bytes);
  size_t capacity(BufferSlot slot) const;
  size_t totalBytes() const;

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Buffer {
    std::unique_ptr<void, Free> mem;
    size_t size = 0;
  };
  Buffer bufs_[static_cast<int>(BufferSlot::kCount)];
};

}  // namespace coll::engine
