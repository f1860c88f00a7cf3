#include "transport/shm/shm_segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <utility>

#include "base/error.hpp"

namespace coll::shm {
namespace {

// Closes the descriptor when the mapping is done with it (the mapping keeps the object).
struct Fd {
  int fd;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

uint8_t* mmapShared(int fd, size_t bytes, const std::string& name) {
  // Not populated: the creator's fallocate has allocated every page, so none can fail
  // later, but the kernel zeroes a page at its first touch, and a job of many ranks per
  // host has rings to peers it never talks to (a ring algorithm uses two). prefaultHot
  // touches what every message uses.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    COLL_THROW(collSystemError, "shm: mmap of segment ", name, " (", bytes,
               " bytes) failed: ", sysErrorText(err));
  }
  return static_cast<uint8_t*>(p);
}

// The first bytes of each ring, where the first messages go, and the control lines:
// touched now, so those messages do not pay a page fault each on the latency path. The
// rest of a ring faults in as the ring's head first passes it.
constexpr size_t kPrefaultRingBytes = 64 << 10;

void prefaultHot(const uint8_t* base, size_t ringBytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto touch = [&](size_t from, size_t len) {
    for (size_t off = from; off < from + len; off += page) (void)*static_cast<const volatile uint8_t*>(base + off);
  };
  touch(0, kRingOffset);
  for (int c = 0; c < 2; ++c) touch(kRingOffset + static_cast<size_t>(c) * ringBytes, std::min(ringBytes, kPrefaultRingBytes));
}

#ifdef __SANITIZE_THREAD__
// Under ThreadSanitizer, ranks that are threads of one process share one mapping of each
// segment. The sanitizer keys memory and synchronisation by address: with a mapping per
// rank it could not pair a release-store through one with the acquire-load through the
// other, and would report every ring access. One address per object lets it check the
// rings' ordering for real. Ordinary builds keep a mapping per rank, as between processes.
struct SharedMaps {
  struct Map {
    uint8_t* base;
    size_t bytes;
    int refs;
  };
  std::mutex mu;
  std::map<std::pair<dev_t, ino_t>, Map> byFile;
  static SharedMaps& instance() {
    static SharedMaps* m = new SharedMaps;  // never destroyed: segments may outlive statics
    return *m;
  }
};

uint8_t* mapShared(int fd, size_t bytes, const std::string& name) {
  struct stat st;
  COLL_SYSCHECK(fstat(fd, &st), strCat("shm: fstat of segment ", name));
  SharedMaps& m = SharedMaps::instance();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.byFile.find({st.st_dev, st.st_ino});
  if (it != m.byFile.end() && it->second.bytes == bytes) {
    ++it->second.refs;
    return it->second.base;
  }
  uint8_t* p = mmapShared(fd, bytes, name);
  if (it == m.byFile.end()) m.byFile.emplace(std::make_pair(st.st_dev, st.st_ino), SharedMaps::Map{p, bytes, 1});
  return p;
}

void unmapShared(uint8_t* base, size_t bytes) {
  SharedMaps& m = SharedMaps::instance();
  std::lock_guard<std::mutex> lock(m.mu);
  for (auto it = m.byFile.begin(); it != m.byFile.end(); ++it) {
    if (it->second.base != base) continue;
    if (--it->second.refs > 0) return;
    m.byFile.erase(it);
    break;
  }
  munmap(base, bytes);
}
#else
uint8_t* mapShared(int fd, size_t bytes, const std::string& name) { return mmapShared(fd, bytes, name); }
void unmapShared(uint8_t* base, size_t bytes) { munmap(base, bytes); }
#endif

// A record key: random, and never zero (a zero key would leave headers as they are,
// unsealed, and open() refuses it as a header written without keys).
uint64_t newRecordKey(const void* salt) {
  uint64_t k = 0;
  if (getrandom(&k, sizeof k, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof k)) {
    // No entropy yet (early boot): any value that differs between segments will do, as
    // the key guards against stale ring bytes, not against an attacker.
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    k = (static_cast<uint64_t>(ts.tv_nsec) << 20) ^ static_cast<uint64_t>(ts.tv_sec) ^
        (static_cast<uint64_t>(getpid()) << 40) ^ reinterpret_cast<uintptr_t>(salt);
    k *= 0x9E3779B97F4A7C15ull;
  }
  return k ? k : 0x5DEECE66Dull;
}

}  // namespace

std::string checkRingBytes(uint64_t ringBytes) {
  if (ringBytes < kMinRingBytes || ringBytes > kMaxRingBytes || (ringBytes & (ringBytes - 1)))
    return strCat("ring size ", ringBytes, " is not a power of two in [", kMinRingBytes, ", ",
                  kMaxRingBytes, "]");
  return {};
}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    reset();
    base_ = o.base_;
    bytes_ = o.bytes_;
    ringBytes_ = o.ringBytes_;
    name_ = std::move(o.name_);
    fd_ = o.fd_;
    o.base_ = nullptr;
    o.bytes_ = 0;
    o.fd_ = -1;
    keys_[0] = o.keys_[0];
    keys_[1] = o.keys_[1];
  }
  return *this;
}

void Segment::reset() {
  unlink();
  if (base_) unmapShared(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

void Segment::unlink() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {
// What readlink shows for a descriptor of the memfd named `name`.
std::string memfdLink(const std::string& name) { return "/memfd:" + name.substr(name[0] == '/') + " (deleted)"; }
}  // namespace

Segment Segment::create(const std::string& name, size_t ringBytes) {
  std::string why = checkRingBytes(ringBytes);
  COLL_CHECK_ARG(why.empty(), "COLL_SHM_RING_BYTES: ", why);
  COLL_CHECK_ARG(!name.empty() && name.size() < 200, "shm: segment name '", name, "' is empty or too long");
  Segment s;
  s.name_ = name;
  s.ringBytes_ = ringBytes;
  s.bytes_ = segmentBytesFor(ringBytes);
  // An anonymous memory file, not a name in /dev/shm: the kernel frees it with the last
  // descriptor and mapping, however the processes end (SIGKILL, a default SIGTERM, the
  // launcher killed), so nothing can be left behind. The peer opens it through
  // /proc/<pid>/fd while we hold the descriptor (see open()).
  s.fd_ = memfd_create(name.c_str() + (name[0] == '/'), MFD_CLOEXEC);
  if (s.fd_ < 0) {
    int err = errno;
    COLL_THROW(collSystemError, "shm: cannot create segment ", name, ": memfd_create: ", sysErrorText(err));
  }
  // Allocated now rather than sized with ftruncate: a sparse file maps fine, and the first
  // store into a page the kernel cannot supply (memory limit of the cgroup) kills the
  // process with SIGBUS (at the header, just below) instead of failing this call.
  int err;
  while ((err = posix_fallocate(s.fd_, 0, static_cast<off_t>(s.bytes_))) == EINTR) {
  }
  if (err != 0)
    COLL_THROW(collSystemError, "shm: cannot allocate segment ", name, " of ", s.bytes_,
               " bytes: ", sysErrorText(err),
               err == ENOSPC || err == ENOMEM ? " (out of memory for shared segments: lower "
                                                "COLL_SHM_RING_BYTES or set COLL_TRANSPORT=tcp)" : "");
  s.base_ = mapShared(s.fd_, s.bytes_, name);
  prefaultHot(s.base_, ringBytes);
  SegHeader* h = s.header();
  h->magic = kSegMagic;
  h->version = kSegVersion;
  h->lineBytes = kLine;
  h->ringBytes = ringBytes;
  h->segBytes = s.bytes_;
  for (int c = 0; c < 2; ++c) s.keys_[c] = h->recordKey[c] = newRecordKey(s.base_ + c);
  return s;
}

Segment Segment::open(const std::string& name, int creatorPid) {
  Segment s;
  s.name_ = name;
  // The creator holds the memfd open until we have mapped it: find it among its
  // descriptors by name. Reading another process's /proc/<pid>/fd needs the permission
  // that single-copy transfers need anyway (same user, not undumpable).
  const std::string want = memfdLink(name);
  const std::string dir = strCat("/proc/", creatorPid, "/fd");
  Fd fd{-1};
  int err = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::string path = dir + "/" + e->d_name;
      char link[512];
      ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
      if (n <= 0 || std::string(link, static_cast<size_t>(n)) != want) continue;
      fd.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
      if (fd.fd < 0) err = errno;
      break;
    }
    closedir(d);
  } else {
    err = errno;
  }
  if (fd.fd < 0)
    COLL_THROW(collSystemError, "shm: cannot open segment ", name, " of pid ", creatorPid, ": ",
               err ? sysErrorText(err) : std::string("the process does not hold it"),
               " (are both ranks on the same host, run by the same user, and can see each other's /proc?)");
  struct stat st;
  COLL_SYSCHECK(fstat(fd.fd, &st), strCat("shm: fstat of segment ", name));
  size_t size = static_cast<size_t>(st.st_size);
  if (size < kRingOffset)
    COLL_THROW(collRemoteError, "shm: segment ", name, " is too small (", size, " bytes)");
  s.base_ = mapShared(fd.fd, size, name);
  s.bytes_ = size;
  SegHeader h;
  std::memcpy(&h, s.base_, sizeof h);  // one snapshot: the creator could still scribble
  if (h.magic != kSegMagic || h.version != kSegVersion || h.lineBytes != kLine)
    COLL_THROW(collRemoteError, "shm: segment ", name, " has a bad header (magic 0x", std::hex,
               h.magic, ", version ", std::dec, h.version, ", line ", h.lineBytes,
               "; expected magic 0x", std::hex, kSegMagic, std::dec, ", version ", kSegVersion,
               ", line ", kLine, ")");
  std::string why = checkRingBytes(h.ringBytes);
  if (!why.empty()) COLL_THROW(collRemoteError, "shm: segment ", name, ": ", why);
  if (h.segBytes != size || segmentBytesFor(h.ringBytes) != size)
    COLL_THROW(collRemoteError, "shm: segment ", name, " header says ", h.segBytes,
               " bytes for rings of ", h.ringBytes, " but the object has ", size, " bytes");
  if (h.recordKey[0] == 0 || h.recordKey[1] == 0)
    COLL_THROW(collRemoteError, "shm: segment ", name, " has no record keys in its header");
  s.ringBytes_ = h.ringBytes;
  prefaultHot(s.base_, s.ringBytes_);
  s.keys_[0] = h.recordKey[0];
  s.keys_[1] = h.recordKey[1];
  return s;
}

std::string Segment::checkHeader() const {
  SegHeader h;
  std::memcpy(&h, base_, sizeof h);
  if (h.magic != kSegMagic || h.version != kSegVersion || h.lineBytes != kLine ||
      h.ringBytes != ringBytes_ || h.segBytes != bytes_ || h.recordKey[0] != keys_[0] ||
      h.recordKey[1] != keys_[1])
    return strCat("shm segment header was overwritten (magic 0x", std::hex, h.magic, std::dec,
                  ", version ", h.version, ", ring ", h.ringBytes, ", size ", h.segBytes,
                  "; expected magic 0x", std::hex, kSegMagic, std::dec, ", version ",
                  kSegVersion, ", ring ", ringBytes_, ", size ", bytes_, ")");
  return {};
}

}  // namespace coll::shm
