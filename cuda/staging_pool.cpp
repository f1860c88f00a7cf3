#include "cuda/staging_pool.hpp"

#include "base/error.hpp"

namespace coll::cuda {
namespace {

constexpr size_t kMinBlock = size_t{64} << 10;
constexpr size_t kLargeGranule = size_t{1} << 20;

// Small blocks round to a power of two (few distinct sizes), large ones to 1 MiB (a
// power of two would waste up to half of a big pinned allocation).
size_t roundBlock(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  if (bytes >= kLargeGranule) return (bytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
  size_t s = kMinBlock;
  while (s < bytes) s <<= 1;
  return s;
}

}  // namespace

PinnedPool::Block& PinnedPool::Block::operator=(Block&& o) noexcept {
  if (this != &o) {
    reset();
    pool_ = std::move(o.pool_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void PinnedPool::Block::reset() {
  if (data_ && pool_) pool_->release(data_, size_);
  data_ = nullptr;
  size_ = 0;
  pool_.reset();
}

void PinnedPool::Block::leak() {
  data_ = nullptr;
  size_ = 0;
  pool_.reset();
}

std::shared_ptr<PinnedPool> PinnedPool::create(std::shared_ptr<StreamBackend> backend,
                                               size_t cacheBytes) {
  return std::shared_ptr<PinnedPool>(new PinnedPool(std::move(backend), cacheBytes));
}

PinnedPool::~PinnedPool() {
  for (auto& [size, p] : free_) backend_->freePinned(p);
}

PinnedPool::Block PinnedPool::acquire(size_t bytes) {
  COLL_CHECK_ARG(bytes > 0, "PinnedPool::acquire: 0 bytes");
  Block b;
  std::multimap<size_t, void*> freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= 2 * roundBlock(bytes)) {
      b.data_ = it->second;
      b.size_ = it->first;
      freeBytes_ -= it->first;
      free_.erase(it);
    } else {
      // Make room under the cap before allocating more (freed outside the lock).
      const size_t want = roundBlock(bytes);
      trimLocked(cacheBytes_ > want ? cacheBytes_ - want : 0, freed);
      b.size_ = want;
    }
  }
  for (auto& [size, p] : freed) backend_->freePinned(p);
  if (!b.data_) {
    b.data_ = backend_->allocPinned(b.size_);
    std::lock_guard<std::mutex> lock(mu_);
    ++allocations_;
  }
  b.pool_ = shared_from_this();
  return b;
}

void PinnedPool::trimLocked(size_t keep, std::multimap<size_t, void*>& freed) {
  while (freeBytes_ > keep && !free_.empty()) {
    auto largest = std::prev(free_.end());
    freeBytes_ -= largest->first;
    freed.insert(*largest);
    free_.erase(largest);
  }
}

void PinnedPool::release(void* p, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.emplace(size, p);
  freeBytes_ += size;
}

size_t PinnedPool::cachedBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return freeBytes_;
}

size_t PinnedPool::allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocations_;
}

}  // namespace coll::cuda
