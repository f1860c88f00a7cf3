// Registering user buffers on an InfiniBand device, and choosing how cached
// registrations are kept true (reg_cache.hpp).
#include "transport/net/ib/ib_mem.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.hpp"

namespace coll::net::ib {
namespace {

size_t pageSize() { return size_t(sysconf(_SC_PAGESIZE)); }

std::string bytesText(uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return strCat(b >> 30, " GiB");
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return strCat(b >> 20, " MiB");
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return strCat(b >> 10, " KiB");
  return strCat(b, " bytes");
}

std::string memlockText() {
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return "unknown";
  return rl.rlim_cur == RLIM_INFINITY ? "unlimited" : bytesText(rl.rlim_cur);
}

}  // namespace

PagemapFile::~PagemapFile() {
  if (fd_ >= 0) close(fd_);
}

int PagemapFile::fd() {
  if (pid_ != getpid()) {
    if (fd_ >= 0) close(fd_);
    fd_ = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    pid_ = getpid();
  }
  return fd_;
}

bool VerbsRegistrar::reg(uintptr_t addr, size_t len, bool write, MrKeys* out, int* err) {
  int access = write ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : 0;
  if (odp_) access |= IBV_ACCESS_ON_DEMAND;
  errno = 0;
  ibv_mr* mr = ops_.reg_mr(pd_, reinterpret_cast<void*>(addr), len, access);
  if (!mr) {
    *err = errno ? errno : EINVAL;
    return false;
  }
  out->mr = mr;
  out->lkey = mr->lkey;
  out->rkey = mr->rkey;
  out->writable = write;
  return true;
}

void VerbsRegistrar::dereg(const MrKeys& keys) { ops_.dereg_mr(static_cast<ibv_mr*>(keys.mr)); }

bool VerbsRegistrar::frames(uintptr_t addr, size_t pages, uint64_t* out) {
  return ops_.page_frames && ops_.page_frames(pagemap_.fd(), addr, pages, out) == 0;
}

CacheMode chooseCacheMode(const VerbsOps& ops, ibv_context* ctx, const MemoryOptions& opt, std::string* why) {
  if (!opt.cache) {
    *why = "off (COLL_IB_REG_CACHE=off): every zero-copy transfer registers its buffer";
    return CacheMode::kUncached;
  }
  ibv_device_attr_ex ax{};
  if (ops.query_device_ex && ops.query_device_ex(ctx, &ax) == 0 &&
      (ax.odp_caps.general_caps & IBV_ODP_SUPPORT)) {
    const uint32_t need = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE;
    if ((ax.odp_caps.per_transport_caps.rc_odp_caps & need) == need) {
      *why = "on-demand paging (the NIC follows the page tables: freed and reused buffers need no check)";
      return CacheMode::kOnDemand;
    }
  }
  // A page of our own, touched: its frame reads as non-zero where frames are visible.
  volatile uint64_t probe = 1;
  uint64_t frame = 0;
  const uintptr_t page = reinterpret_cast<uintptr_t>(&probe) & ~(uintptr_t(pageSize()) - 1);
  PagemapFile pagemap;
  int rc = ops.page_frames ? ops.page_frames(pagemap.fd(), page, 1, &frame) : ENOSYS;
  if (rc == 0 && frame != 0) {
    *why = "page check (each reuse first compares the buffer's page frames with those registered)";
    return CacheMode::kPageCheck;
  }
  *why = strCat("off: the device has no on-demand paging and page frames cannot be read (",
                sysErrorText(rc), "; /proc/self/pagemap shows them with CAP_SYS_ADMIN), so a reused "
                "address cannot be told from a new buffer; every zero-copy transfer registers its buffer");
  return CacheMode::kUncached;
}

DeviceMemory::DeviceMemory(const VerbsOps& ops, ibv_pd* pd, CacheMode mode, const MemoryOptions& opt)
    : reg_(ops, pd, mode == CacheMode::kOnDemand), cache_(&reg_, mode, opt.maxIdleBytes, pageSize()) {}

const RegCache::Entry* DeviceMemory::acquire(const void* p, size_t len, bool write, const std::string& port) {
  int err = 0;
  const RegCache::Entry* e = cache_.acquire(p, len, write, &err);
  if (!e) throw Error(collSystemError, regFailureText(err, len, p, write, port));
  return e;
}

std::string regFailureText(int err, size_t bytes, const void* addr, bool write, const std::string& port) {
  std::string head = strCat("InfiniBand ", port, ": registering the ", write ? "receive" : "send", " buffer (",
                            bytesText(bytes), " at ", addr, ") for a zero-copy transfer failed: ", sysErrorText(err));
  std::string cause;
  switch (err) {
    case ENOMEM:
    case EAGAIN:
      cause = strCat("zero-copy pins the buffer's pages and the locked-memory limit (ulimit -l: ", memlockText(),
                     ") or the NIC's translation tables are full. Raise the limit (ulimit -l unlimited; "
                     "LimitMEMLOCK=infinity for a systemd service; 'memlock unlimited' in "
                     "/etc/security/limits.conf; --ulimit memlock=-1 for a container), or set COLL_IB_ZCOPY=0 "
                     "to copy through the bounce slots instead");
      break;
    case EFAULT:
    case EACCES:
    case EPERM:
      cause = write ? "the buffer is not mapped writable in this process (freed, or read-only memory)"
                    : "the buffer is not mapped in this process (freed during the call?)";
      break;
    default:
      cause = "set COLL_IB_ZCOPY=0 to copy through the bounce slots instead";
  }
  return head + ": " + cause;
}

}  // namespace coll::net::ib
