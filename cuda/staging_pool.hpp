// Pinned host staging blocks, cached for reuse: page-locking memory costs far more than
// a collective on it, so a communicator keeps what it used (up to a cap).
//
// A Block may be released on any thread, including a CUDA host-function thread, where
// CUDA calls are forbidden: releasing only returns the block to the cache, and memory is
// given back to CUDA only in acquire() (trimming the cache) and in the pool's destructor.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "cuda/stream_backend.hpp"

namespace coll::cuda {

class PinnedPool : public std::enable_shared_from_this<PinnedPool> {
 public:
  class Block {
   public:
    Block() = default;
    Block(Block&& o) noexcept { *this = std::move(o); }
    Block& operator=(Block&& o) noexcept;
    ~Block() { reset(); }
    void* data() const { return data_; }
    size_t size() const { return size_; }
    // Returns the block to the cache.
    void reset();
    // Gives up the block for good: used when a copy into it may still be in flight.
    void leak();

   private:
    friend class PinnedPool;
    std::shared_ptr<PinnedPool> pool_;
    void* data_ = nullptr;
    size_t size_ = 0;
  };

  // cacheBytes: most bytes kept in the cache when idle.
  static std::shared_ptr<PinnedPool> create(std::shared_ptr<StreamBackend> backend, size_t cacheBytes);
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // A block of at least `bytes` (a cached one when one fits without wasting half of it).
  Block acquire(size_t bytes);
  size_t cachedBytes() const;
  size_t allocations() const;  // blocks ever allocated from CUDA (for tests and logs)

 private:
  PinnedPool(std::shared_ptr<StreamBackend> backend, size_t cacheBytes)
      : backend_(std::move(backend)), cacheBytes_(cacheBytes) {}
  void release(void* p, size_t size);
  void trimLocked(size_t keep, std::multimap<size_t, void*>& freed);

  std::shared_ptr<StreamBackend> backend_;
  size_t cacheBytes_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // size -> block
  size_t freeBytes_ = 0;
  size_t allocations_ = 0;
};

}  // namespace coll::cuda
