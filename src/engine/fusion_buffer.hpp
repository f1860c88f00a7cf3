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
enum class BufferSlot : int { Fused = 0, FusedAlt = 1, Send = 2, Recv = 3, Scratch = 4, kCount = 5 };

class FusionBuffers {
 public:
  // At least `bytes` bytes, 64-byte aligned; contents are undefined. Growing a slot frees
  // its previous memory: a caller must not hold a slot across another get of it.
  void* get(BufferSlot slot, size_t bytes);
  // At least `bytes` zero bytes, 64-byte aligned, shared and read-only: what a joined rank
  // sends. The memory lives as long as any holder, so an operation still sending from a
  // smaller one is unaffected when a later, larger one replaces it here.
  std::shared_ptr<const void> zeros(size_t bytes);
  size_t capacity(BufferSlot slot) const;
  size_t zerosCapacity() const { return zerosSize_; }
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
  std::shared_ptr<const void> zeros_;
  size_t zerosSize_ = 0;
};

}  // namespace coll::engine
