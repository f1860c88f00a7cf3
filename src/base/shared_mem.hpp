// Host memory that same-host peers reach directly (collMemAlloc).
//
// Each allocation is an anonymous shared-memory file (memfd) mapped into this process. A
// peer process on the same host opens it through /proc/<pid>/fd/<fd> and maps it too, so
// the shm transport copies into and out of such buffers with plain loads and stores: no
// system call and no page pinning per piece, as process_vm_readv/writev need for any other
// buffer. The file has no name, so nothing is left behind when a process dies.
//
// The table is per process, as the allocations are (like malloc's own bookkeeping):
// buffers are allocated before, and used by, any number of communicators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace coll {

// How a region of collMemAlloc memory is named to a peer (on the wire: 32 bytes).
struct RegionRef {
  uint64_t base = 0;   // the owner's address of the region's first byte
  uint64_t bytes = 0;  // the region's length (whole pages)
  uint64_t ino = 0;    // inode of the memfd, checked by the peer after it opened the file
  int32_t fd = -1;     // the owner's descriptor of the memfd; -1: not collMemAlloc memory
  uint32_t gen = 0;    // the owner's count of freed regions: peers drop cached mappings on a change
  bool valid() const { return fd >= 0; }
  // Whether [addr, addr + n) lies inside the region (overflow-safe).
  bool contains(uint64_t addr, uint64_t n) const {
    return addr >= base && n <= bytes && addr - base <= bytes - n;
  }
};
static_assert(sizeof(RegionRef) == 32, "RegionRef is part of the shm wire format");

class SharedAllocations {
 public:
  static SharedAllocations& instance();

  // Zero-filled, page-aligned, at least `bytes` (> 0). Throws collSystemError.
  void* allocate(size_t bytes);
  // `p` must be a pointer allocate() returned and not yet released (collInvalidArgument).
  void release(void* p);
  // The region holding all of [p, p + n), or an invalid ref.
  RegionRef find(const void* p, size_t n) const;
  size_t count() const;

 private:
  SharedAllocations() = default;
  struct Entry {
    size_t bytes;
    int fd;
    uint64_t ino;
  };
  mutable std::mutex mu_;
  std::map<uintptr_t, Entry> regions_;  // by base address
  uint32_t frees_ = 0;
};

}  // namespace coll
