// The libibverbs calls the InfiniBand backend makes, as a table of function pointers, so
// tests can put an in-process fake fabric under the backend (this machine class often
// has no RDMA NIC). The real table calls libibverbs; several of these are inline
// functions or macros in verbs.h, which the real table wraps.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace coll::net::ib {

struct VerbsOps {
  ibv_device** (*get_device_list)(int* num);
  void (*free_device_list)(ibv_device** list);
  const char* (*get_device_name)(ibv_device* device);
  ibv_context* (*open_device)(ibv_device* device);
  int (*close_device)(ibv_context* context);
  int (*query_device)(ibv_context* context, ibv_device_attr* attr);
  int (*query_port)(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  // Returns non-zero where the kernel cannot tell the GID's type (then query_gid is used).
  int (*query_gid_ex)(ibv_context* context, uint32_t port, uint32_t index,
                      ibv_gid_entry* entry, uint32_t flags);
  ibv_pd* (*alloc_pd)(ibv_context* context);
  int (*dealloc_pd)(ibv_pd* pd);
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access);
  int (*dereg_mr)(ibv_mr* mr);
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cqContext,
                       ibv_comp_channel* channel, int compVector);
  int (*destroy_cq)(ibv_cq* cq);
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroy_qp)(ibv_qp* qp);
  int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
  int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
  int (*poll_cq)(ibv_cq* cq, int num, ibv_wc* wc);
  // Extended attributes (on-demand paging); non-zero where the provider has none.
  int (*query_device_ex)(ibv_context* context, ibv_device_attr_ex* attr);
  // Not libibverbs but the kernel: the page frames behind `pages` pages from `addr`
  // (page aligned), read from `pagemap` (/proc/self/pagemap, opened by this process): a
  // frame number with bit 63 set for a page present, 0 for one that is not. Returns 0,
  // or an errno (EPERM where the kernel hides frame numbers, as it does from processes
  // without CAP_SYS_ADMIN). The fake fabric has its own pages (and ignores `pagemap`),
  // so the registration cache's check runs against them in tests.
  int (*page_frames)(int pagemap, uintptr_t addr, size_t pages, uint64_t* frames);
};

// The table that calls libibverbs.
const VerbsOps& realVerbsOps();

// Makes the next init() of the backend use `ops` (it must outlive every endpoint made
// from that init); nullptr restores libibverbs. Endpoints made before keep theirs.
void setVerbsOpsForTesting(const VerbsOps* ops);

// What the next init() uses.
const VerbsOps& currentVerbsOps();

}  // namespace coll::net::ib
