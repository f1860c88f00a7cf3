#include "base/shared_mem.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "base/error.hpp"

namespace coll {

SharedAllocations& SharedAllocations::instance() {
  // Never destroyed: buffers may be freed from other static destructors.
  static auto* table = new SharedAllocations();
  return *table;
}

void* SharedAllocations::allocate(size_t bytes) {
  COLL_CHECK_ARG(bytes > 0, "size is 0");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // The file is sized with ftruncate: the rounded length must fit in an off_t.
  COLL_CHECK_ARG(bytes <= static_cast<size_t>(INT64_MAX) - page, "size ", bytes, " is too large");
  const size_t len = (bytes + page - 1) / page * page;
  int fd = memfd_create("collective-mem", MFD_CLOEXEC);
  COLL_SYSCHECK(fd, "memfd_create");
  struct stat st {};
  if (ftruncate(fd, static_cast<off_t>(len)) != 0 || fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    COLL_THROW(collSystemError, "sizing a shared allocation of ", len, " bytes: ", sysErrorText(err));
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    COLL_THROW(collSystemError, "mapping a shared allocation of ", len, " bytes: ", sysErrorText(err));
  }
  std::lock_guard<std::mutex> lk(mu_);
  regions_[reinterpret_cast<uintptr_t>(p)] = Entry{len, fd, static_cast<uint64_t>(st.st_ino)};
  return p;
}

void SharedAllocations::release(void* p) {
  Entry e;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = regions_.find(reinterpret_cast<uintptr_t>(p));
    COLL_CHECK_ARG(it != regions_.end(), "pointer ", p,
                   " was not returned by collMemAlloc (or was freed already)");
    e = it->second;
    regions_.erase(it);
    ++frees_;
  }
  munmap(p, e.bytes);
  ::close(e.fd);
}

RegionRef SharedAllocations::find(const void* p, size_t n) const {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lk(mu_);
  RegionRef ref;
  ref.gen = frees_;
  auto it = regions_.upper_bound(addr);
  if (it == regions_.begin()) return ref;
  --it;
  RegionRef found{it->first, it->second.bytes, it->second.ino, it->second.fd, frees_};
  return found.contains(addr, n) ? found : ref;
}

size_t SharedAllocations::count() const {
  std::lock_guard<std::mutex> lk(mu_);
  return regions_.size();
}

}  // namespace coll
