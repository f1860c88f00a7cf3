// The libibverbs table behind the InfiniBand backend, and the test override.
#include "transport/net/ib/verbs_ops.hpp"

#include <atomic>

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

const VerbsOps kReal = {
    ibv_get_device_list, ibv_free_device_list, ibv_get_device_name, ibv_open_device,
    ibv_close_device,    ibv_query_device,     queryPort,           ibv_query_gid,
    queryGidEx,          ibv_alloc_pd,         ibv_dealloc_pd,      regMr,
    ibv_dereg_mr,        ibv_create_cq,        ibv_destroy_cq,      ibv_create_qp,
    ibv_modify_qp,       ibv_destroy_qp,       postSend,            postRecv,
    pollCq,
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
