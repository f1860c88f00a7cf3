#include "transport/shm/peer_regions.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "base/error.hpp"
#include "base/log.hpp"

namespace coll::shm {

uint8_t* PeerRegions::translate(const RegionRef& ref, uint64_t addr) {
  if (!ref.valid()) return nullptr;
  if (ref.gen > gen_) {
    // The peer freed regions since we last looked: any of ours may be one of them.
    clear();
    gen_ = ref.gen;
  }
  for (const Map& m : maps_)
    if (same(m.ref, ref)) return m.local + (addr - ref.base);
  for (const RegionRef& r : refused_)
    if (same(r, ref)) return nullptr;
  uint8_t* local = open(ref);
  if (!local) {
    if (refused_.size() == kMaxMaps) refused_.erase(refused_.begin());
    refused_.push_back(ref);
    return nullptr;
  }
  return local + (addr - ref.base);
}

uint8_t* PeerRegions::open(const RegionRef& ref) {
  const std::string path = strCat("/proc/", pid_, "/fd/", ref.fd);
  auto refuse = [&](const std::string& why) -> uint8_t* {
    COLL_INFO("shm: cannot map pid %d's shared buffer (%s, %llu bytes): %s; copying it through the "
              "kernel instead", pid_, path.c_str(), static_cast<unsigned long long>(ref.bytes), why.c_str());
    return nullptr;
  };
  // The descriptor must still be the peer's memfd: the name shows in the link's target.
  char target[64] = {};
  ssize_t len = readlink(path.c_str(), target, sizeof target - 1);
  if (len < 0) return refuse(sysErrorText(errno));
  if (std::string(target, static_cast<size_t>(len)).rfind("/memfd:collective-mem", 0) != 0)
    return refuse(strCat("it is '", std::string(target, static_cast<size_t>(len)), "', not a collMemAlloc file"));
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return refuse(sysErrorText(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_ino) != ref.ino ||
      static_cast<uint64_t>(st.st_size) < ref.bytes) {
    ::close(fd);
    return refuse("the file is not the region the peer named (inode or size differ)");
  }
  void* p = mmap(nullptr, ref.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) return refuse(sysErrorText(err));
  if (maps_.size() == kMaxMaps) {
    munmap(maps_.front().local, maps_.front().ref.bytes);
    maps_.erase(maps_.begin());
  }
  maps_.push_back({ref, static_cast<uint8_t*>(p)});
  return static_cast<uint8_t*>(p);
}

void PeerRegions::clear() {
  for (const Map& m : maps_) munmap(m.local, m.ref.bytes);
  maps_.clear();
  refused_.clear();
}

}  // namespace coll::shm
