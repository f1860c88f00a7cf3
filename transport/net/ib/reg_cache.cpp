// The registration cache of the InfiniBand backend (see the header for when entries go
// stale and how each mode finds out).
#include "transport/net/ib/reg_cache.hpp"

#include <algorithm>
#include <cerrno>

namespace coll::net::ib {
namespace {
// Candidates a lookup looks at: a miss past them registers an overlapping entry, which
// costs a registration, never a wrong answer.
constexpr int kMaxScan = 64;
// Idle entries kept whatever their bytes (many small buffers).
constexpr size_t kMaxIdleEntries = 4096;
}  // namespace

const char* cacheModeName(CacheMode m) {
  switch (m) {
    case CacheMode::kOnDemand: return "on-demand paging";
    case CacheMode::kPageCheck: return "page check";
    case CacheMode::kUncached: return "off";
  }
  return "?";
}

RegCache::RegCache(Registrar* r, CacheMode mode, size_t maxIdleBytes, size_t pageSize)
    : r_(r), mode_(mode), maxIdle_(maxIdleBytes), page_(pageSize) {}

RegCache::~RegCache() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!all_.empty()) destroy(&all_.front());
}

const MrKeys& RegCache::keys(const Entry* e) { return e->keys; }

CacheStats RegCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return st_;
}

RegCache::Entry* RegCache::find(uintptr_t lo, uintptr_t hi, bool write) {
  // Entries may overlap; any that covers the range will do. Entries starting at or below
  // lo are the candidates, nearest first.
  int scanned = 0;
  for (auto it = byStart_.upper_bound(lo); it != byStart_.begin() && scanned++ < kMaxScan;) {
    --it;
    Entry* e = it->second;
    if (e->hi >= hi && (e->keys.writable || !write)) return e;
  }
  return nullptr;
}

bool RegCache::samePages(Entry* e, uintptr_t lo, uintptr_t hi) {
  const size_t first = (lo - e->lo) / page_, n = (hi - lo) / page_;
  scratch_.resize(n);
  st_.checks++;
  if (!r_->frames(lo, n, scratch_.data())) return false;
  return std::equal(scratch_.begin(), scratch_.end(), e->frames.begin() + long(first));
}

bool RegCache::tryReg(uintptr_t lo, uintptr_t hi, bool write, MrKeys* k, int* err) {
  if (r_->reg(lo, hi - lo, write, k, err)) return true;
  if (*err == ENOMEM || *err == EAGAIN) {
    // Out of room to pin (the locked-memory limit, or the NIC's tables): what no
    // transfer uses goes first.
    while (!idle_.empty()) {
      st_.evicted++;
      destroy(idle_.front());
    }
    return r_->reg(lo, hi - lo, write, k, err);
  }
  return false;
}

RegCache::Entry* RegCache::add(uintptr_t lo, uintptr_t hi, bool write, int* err) {
  MrKeys k;
  bool ok = tryReg(lo, hi, true, &k, err);
  // A send's buffer may be read-only memory: it then gets an entry of its own.
  if (!ok && !write && (*err == EFAULT || *err == EACCES || *err == EPERM)) ok = tryReg(lo, hi, false, &k, err);
  if (!ok) return nullptr;
  all_.emplace_back();
  Entry* e = &all_.back();
  e->self = std::prev(all_.end());
  e->lo = lo;
  e->hi = hi;
  e->keys = k;
  st_.pinnedBytes += hi - lo;
  st_.entries++;
  if (mode_ == CacheMode::kUncached) return e;
  if (mode_ == CacheMode::kPageCheck) {
    // Read after registering: the registration has faulted every page in and pinned it.
    e->frames.resize((hi - lo) / page_);
    st_.checks++;
    if (!r_->frames(lo, e->frames.size(), e->frames.data())) return e;  // unknowable: used once
  }
  e->indexed = true;
  byStart_.emplace(lo, e);
  return e;
}

const RegCache::Entry* RegCache::acquire(const void* p, size_t len, bool write, int* err) {
  std::lock_guard<std::mutex> lock(mu_);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = a & ~(uintptr_t(page_) - 1);
  const uintptr_t hi = (a + len + page_ - 1) & ~(uintptr_t(page_) - 1);
  Entry* e = mode_ == CacheMode::kUncached ? nullptr : find(lo, hi, write);
  if (e && mode_ == CacheMode::kPageCheck && !samePages(e, lo, hi)) {
    // Freed and reused, or remapped: these pages are not the ones the entry pinned.
    st_.invalidated++;
    unlink(e);
    if (e->refs == 0) destroy(e);
    e = nullptr;
  }
  if (e) {
    st_.hits++;
  } else {
    st_.misses++;
    e = add(lo, hi, write, err);
    if (!e) return nullptr;
  }
  if (e->idle) {
    idle_.erase(e->idlePos);
    idleBytes_ -= e->hi - e->lo;
    e->idle = false;
  }
  e->refs++;
  return e;
}

void RegCache::release(const Entry* ce) {
  if (!ce) return;
  std::lock_guard<std::mutex> lock(mu_);
  Entry* e = const_cast<Entry*>(ce);
  if (--e->refs > 0) return;
  if (!e->indexed) {  // uncached, or invalidated while in use
    destroy(e);
    return;
  }
  e->idle = true;
  e->idlePos = idle_.insert(idle_.end(), e);
  idleBytes_ += e->hi - e->lo;
  trimIdle();
}

void RegCache::trimIdle() {
  while ((idleBytes_ > maxIdle_ || idle_.size() > kMaxIdleEntries) && !idle_.empty()) {
    st_.evicted++;
    destroy(idle_.front());
  }
}

void RegCache::dropIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!idle_.empty()) destroy(idle_.front());
}

void RegCache::unlink(Entry* e) {
  if (!e->indexed) return;
  auto range = byStart_.equal_range(e->lo);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second == e) {
      byStart_.erase(it);
      break;
    }
  e->indexed = false;
}

void RegCache::destroy(Entry* e) {
  unlink(e);
  if (e->idle) {
    idle_.erase(e->idlePos);
    idleBytes_ -= e->hi - e->lo;
  }
  r_->dereg(e->keys);
  st_.pinnedBytes -= e->hi - e->lo;
  st_.entries--;
  all_.erase(e->self);
}

}  // namespace coll::net::ib
