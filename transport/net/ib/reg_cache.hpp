// Registrations of user buffers for zero-copy transfers, kept for reuse: registering
// pins every page and costs far more than moving a small message, so a buffer that is
// sent or received again (every step of a training loop) should be registered once.
//
// The classic bug of such caches: the program frees a buffer and a later allocation
// gets the same addresses, backed by other pages. A registration made before still
// names the old pages (pinned, no longer the program's), so the NIC reads stale data or
// writes where nobody looks. Whether a cached entry still names the program's pages is
// settled one of three ways (CacheMode), chosen per device at start-up:
//  - on-demand paging (ODP): the NIC follows the process's page tables itself, so an
//    entry can never go stale;
//  - page check: before each reuse the page frames behind the requested range are read
//    again (/proc/self/pagemap) and compared with those at registration; any change
//    drops the entry and registers afresh;
//  - uncached: where neither is possible, every transfer registers and deregisters.
// Pure logic: the device side (verbs, pagemap) is behind Registrar, so tests drive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <vector>

namespace coll::net::ib {

enum class CacheMode { kOnDemand, kPageCheck, kUncached };
const char* cacheModeName(CacheMode m);

struct MrKeys {
  void* mr = nullptr;  // the device's handle (an ibv_mr*), opaque here
  uint32_t lkey = 0, rkey = 0;
  bool writable = false;  // local and remote writes allowed (receives need it)
};

class Registrar {
 public:
  virtual ~Registrar() = default;
  // Registers [addr, addr + len), page aligned; write: for local and remote writes too
  // (out->writable says which). false with *err = errno on failure.
  virtual bool reg(uintptr_t addr, size_t len, bool write, MrKeys* out, int* err) = 0;
  virtual void dereg(const MrKeys& keys) = 0;
  // The page frames behind `pages` pages from addr (page aligned); false when they
  // cannot be read.
  virtual bool frames(uintptr_t addr, size_t pages, uint64_t* out) = 0;
};

struct CacheStats {
  uint64_t hits = 0, misses = 0;
  uint64_t invalidated = 0;  // entries found naming other pages than the program's
  uint64_t evicted = 0;      // idle entries dropped for room
  uint64_t checks = 0;       // page checks made
  uint64_t pinnedBytes = 0;  // registered now
  uint64_t entries = 0;      // registered now
};

class RegCache {
 public:
  struct Entry;
  // maxIdleBytes: registered bytes kept while no transfer uses them (least recently
  // used first out); pageSize a power of two.
  RegCache(Registrar* r, CacheMode mode, size_t maxIdleBytes, size_t pageSize);
  ~RegCache();  // deregisters every entry
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  // A registration covering [p, p + len) (len > 0) that allows writes when `write`,
  // held until release(). nullptr with *err = errno when the device refuses (after
  // dropping idle entries and retrying once where the refusal was for lack of room).
  // A send (write false) registers for writes too where the memory allows, so that
  // receives into the same buffer share the entry; read-only memory gets a read-only
  // entry.
  const Entry* acquire(const void* p, size_t len, bool write, int* err);
  void release(const Entry* e);
  static const MrKeys& keys(const Entry* e);

  CacheMode mode() const { return mode_; }
  CacheStats stats() const;
  // Deregisters every entry no transfer uses.
  void dropIdle();

 private:
  Entry* find(uintptr_t lo, uintptr_t hi, bool write);
  bool samePages(Entry* e, uintptr_t lo, uintptr_t hi);
  Entry* add(uintptr_t lo, uintptr_t hi, bool write, int* err);
  bool tryReg(uintptr_t lo, uintptr_t hi, bool write, MrKeys* k, int* err);
  void unlink(Entry* e);  // out of the index: no later acquire finds it
  void destroy(Entry* e);
  void trimIdle();

  Registrar* r_;
  CacheMode mode_;
  size_t maxIdle_;
  size_t page_;
  mutable std::mutex mu_;
  std::list<Entry> all_;
  std::multimap<uintptr_t, Entry*> byStart_;  // entries that acquire may return
  std::list<Entry*> idle_;                    // unused entries, least recent first
  size_t idleBytes_ = 0;
  std::vector<uint64_t> scratch_;  // page frames read for a check
  CacheStats st_;
};

struct RegCache::Entry {
  uintptr_t lo = 0, hi = 0;
  MrKeys keys;
  int refs = 0;
  bool indexed = false;
  std::vector<uint64_t> frames;  // kPageCheck: the frames at registration
  std::list<Entry>::iterator self;
  std::list<Entry*>::iterator idlePos;
  bool idle = false;
};

}  // namespace coll::net::ib
