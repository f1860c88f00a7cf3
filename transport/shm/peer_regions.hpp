// Mappings of a peer process's collMemAlloc regions (base/shared_mem.hpp), so that the shm
// link copies into and out of them with loads and stores instead of process_vm_readv/writev.
//
// A region is opened through /proc/<pid>/fd/<fd> (the same permission as cross-memory
// attach: a process of the same user that may trace the peer), checked to be the peer's
// memfd (name, inode, size), mapped once and kept; at most kMaxMaps stay mapped, the oldest
// unmapped first, and all of them are dropped when the peer's count of freed regions moves
// (a freed region's pages stay alive while we map them). A region that cannot be mapped is
// remembered and left to the kernel path, with one INFO line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/shared_mem.hpp"

namespace coll::shm {

class PeerRegions {
 public:
  static constexpr size_t kMaxMaps = 32;

  explicit PeerRegions(int peerPid) : pid_(peerPid) {}
  ~PeerRegions() { clear(); }
  PeerRegions(const PeerRegions&) = delete;
  PeerRegions& operator=(const PeerRegions&) = delete;

  // Our address of the peer's byte at `addr` inside the region `ref` names, or nullptr when
  // ref is not a region or it cannot be mapped here. The caller has checked that the range
  // it copies lies inside ref (RegionRef::contains).
  uint8_t* translate(const RegionRef& ref, uint64_t addr);
  size_t mapped() const { return maps_.size(); }

 private:
  struct Map {
    RegionRef ref;
    uint8_t* local;
  };
  bool same(const RegionRef& a, const RegionRef& b) const {
    return a.base == b.base && a.bytes == b.bytes && a.ino == b.ino && a.fd == b.fd;
  }
  uint8_t* open(const RegionRef& ref);
  void clear();

  int pid_;
  uint32_t gen_ = 0;
  std::vector<Map> maps_;          // the most recently mapped last
  std::vector<RegionRef> refused_;  // could not be mapped (until the next generation)
};

}  // namespace coll::shm
