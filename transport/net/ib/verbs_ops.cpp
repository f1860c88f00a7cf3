// The libibverbs table behind the InfiniBand backend, and the test override.
#include "transport/net/ib/verbs_ops.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace coll::net::ib {
namespace {

// ibv_query_port, ibv_reg_mr, ibv_query_gid_ex, ibv_post_*, ibv_poll_cq are macros or
// inline functions in verbs.h: a pointer needs a real function.
int queryPort(ibv_context* c, uint8_t port, ibv_port_attr* a) { return ibv_query_port(c, port, a); }
int queryGidEx(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e, uint32_t flags) {
  return ibv_query_gid_ex(c, port, index, e, flags);
}
ibv_mr* regMr(ibv_pd* pd, void* addr, size_t len, int access) { return ibv_reg_mr(pd, addr, len, access); }
int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return ibv_post_send(qp, wr, bad); }
int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return ibv_post_recv(qp, wr, bad); }
int pollCq(ibv_cq* cq, int n, ibv_wc* wc) { return ibv_poll_cq(cq, n, wc); }
int queryDeviceEx(ibv_context* c, ibv_device_attr_ex* a) { return ibv_query_device_ex(c, nullptr, a); }

int pageFrames(int fd, uintptr_t addr, size_t pages, uint64_t* frames) {
  constexpr uint64_t kPresent = 1ull << 63, kPfnMask = (1ull << 55) - 1;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  if (fd < 0) return EBADF;
  const size_t want = pages * sizeof(uint64_t);
  ssize_t got = pread(fd, frames, want, off_t(addr / page * sizeof(uint64_t)));
  if (got < 0) return errno;
  if (size_t(got) != want) return EIO;
  bool anyPresent = false, anyFrame = false;
  for (size_t i = 0; i < pages; ++i) {
    const bool present = frames[i] & kPresent;
    anyPresent = anyPresent || present;
    anyFrame = anyFrame || (present && (frames[i] & kPfnMask));
    frames[i] = present ? (frames[i] & kPfnMask) | kPresent : 0;
  }
  // Without CAP_SYS_ADMIN every frame number reads as 0: nothing to compare.
  return anyPresent && !anyFrame ? EPERM : 0;
}

const VerbsOps kReal = {
    ibv_get_device_list, ibv_free_device_list, ibv_get_device_name, ibv_open_device,
    ibv_close_device,    ibv_query_device,     queryPort,           ibv_query_gid,
    queryGidEx,          ibv_alloc_pd,         ibv_dealloc_pd,      regMr,
    ibv_dereg_mr,        ibv_create_cq,        ibv_destroy_cq,      ibv_create_qp,
    ibv_modify_qp,       ibv_destroy_qp,       postSend,            postRecv,
    pollCq,              queryDeviceEx,        pageFrames,
};

std::atomic<const VerbsOps*> gOverride{nullptr};

}  // namespace

const VerbsOps& realVerbsOps() { return kReal; }

void setVerbsOpsForTesting(const VerbsOps* ops) { gOverride.store(ops); }

const VerbsOps& currentVerbsOps() {
  const VerbsOps* o = gOverride.load();
  return o ? *o : kReal;
}

}  // namespace coll::net::ib
