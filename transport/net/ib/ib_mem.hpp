// The memory side of one InfiniBand device: registering user buffers for zero-copy
// transfers through the registration cache (reg_cache.hpp), which mode the cache runs
// in on this device, and what a failed registration tells the user.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "transport/net/ib/reg_cache.hpp"
#include "transport/net/ib/verbs_ops.hpp"

namespace coll::net::ib {

// /proc/self/pagemap, kept open (a check is then one pread). Reopened in a child after
// fork: a descriptor opened by the parent reads the parent's pages.
class PagemapFile {
 public:
  PagemapFile() = default;
  ~PagemapFile();
  PagemapFile(const PagemapFile&) = delete;
  PagemapFile& operator=(const PagemapFile&) = delete;
  int fd();  // -1 when it cannot be opened

 private:
  int fd_ = -1;
  int pid_ = 0;
};

// Not thread-safe: the cache calls it under its lock.
class VerbsRegistrar : public Registrar {
 public:
  VerbsRegistrar(const VerbsOps& ops, ibv_pd* pd, bool onDemand) : ops_(ops), pd_(pd), odp_(onDemand) {}
  bool reg(uintptr_t addr, size_t len, bool write, MrKeys* out, int* err) override;
  void dereg(const MrKeys& keys) override;
  bool frames(uintptr_t addr, size_t pages, uint64_t* out) override;

 private:
  const VerbsOps& ops_;
  ibv_pd* pd_;
  bool odp_;
  PagemapFile pagemap_;
};

struct MemoryOptions {
  bool cache = true;                // COLL_IB_REG_CACHE=auto (false: off)
  size_t maxIdleBytes = size_t(4) << 30;  // COLL_IB_REG_CACHE_MAX
};

// How the cache keeps entries true on this device: on-demand paging where the device
// offers it for RC sends and writes, else the page check where this process can read
// page frames, else uncached. *why: the sentence for COLL_DEBUG=INFO.
CacheMode chooseCacheMode(const VerbsOps& ops, ibv_context* ctx, const MemoryOptions& opt, std::string* why);

class DeviceMemory {
 public:
  DeviceMemory(const VerbsOps& ops, ibv_pd* pd, CacheMode mode, const MemoryOptions& opt);
  // Registered memory for [p, p + len), len > 0; throws coll::Error naming the cause and
  // the fix when the device refuses. release() when the transfer is over.
  const RegCache::Entry* acquire(const void* p, size_t len, bool write, const std::string& port);
  void release(const RegCache::Entry* e) { cache_.release(e); }
  RegCache& cache() { return cache_; }

 private:
  VerbsRegistrar reg_;
  RegCache cache_;
};

// What a failed ibv_reg_mr of `bytes` at `addr` on `port` tells the user: errno's text,
// then the likely cause and the fix (the locked-memory limit for ENOMEM, with its value).
std::string regFailureText(int err, size_t bytes, const void* addr, bool write, const std::string& port);

}  // namespace coll::net::ib
