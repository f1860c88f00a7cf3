// The plugin context: one UCP context and worker per init(), the worker address that
// handles carry, and endpoints (created with peer error handling so a dead peer turns
// into an error instead of a wait) with their bounded close.
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>

#include "ucx_plugin.hpp"

namespace coll::net_ucx {

namespace {
thread_local char tLastError[512] = "ucx: no error";

void onEpError(void* arg, ucp_ep_h, ucs_status_t status) {
  static_cast<EpState*>(arg)->status.store(status);
}

void destroy(Context* ctx) {
  // Closes still under way are given up (the worker's destruction ends them) after the
  // bounded wait in finalize; their requests go back to UCX first.
  for (auto& c : ctx->closing) ucp_request_free(c.request);
  ctx->closing.clear();
  if (ctx->worker) ucp_worker_destroy(ctx->worker);
  if (ctx->ucp) ucp_cleanup(ctx->ucp);
  delete ctx;
}

// Queries the worker address (NET_ONLY when asked); false with an error on failure.
bool queryAddress(Context* ctx, bool netOnly, std::vector<uint8_t>& out) {
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
  if (netOnly) {
    attr.field_mask |= UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS;
    attr.address_flags = UCP_WORKER_ADDRESS_FLAG_NET_ONLY;
  }
  ucs_status_t st = ucp_worker_query(ctx->worker, &attr);
  if (st != UCS_OK) {
    fail("ucx: ucp_worker_query (address%s): %s", netOnly ? ", net only" : "", ucs_status_string(st));
    return false;
  }
  auto* p = reinterpret_cast<const uint8_t*>(attr.address);
  out.assign(p, p + attr.address_length);
  ucp_worker_release_address(ctx->worker, attr.address);
  return true;
}

// Notes which transports an endpoint's lanes use ("lane[0]:  2:tcp/lo.0 md[1] ..." in
// UCX's own description), for getProperties' name and the log.
void recordLanes(Context* ctx, ucp_ep_h ep, const char* what) {
  char* text = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  if (!f) return;
  ucp_ep_print_info(ep, f);
  fclose(f);
  std::string lanes;
  for (const char* p = text; p && (p = strstr(p, "lane[")) != nullptr; ++p) {
    const char* q = strstr(p, "]:");
    if (!q) break;
    q += 2;
    while (*q == ' ') ++q;
    while (*q >= '0' && *q <= '9') ++q;
    if (*q != ':') continue;
    const char* name = ++q;
    while (*q && *q != ' ' && *q != '\n') ++q;
    std::string lane(name, q);
    lanes += (lanes.empty() ? "" : ", ") + lane;
    std::string tl = lane.substr(0, lane.find('/'));
    bool known = false;
    for (size_t at = 0; at <= ctx->transports.size();) {
      size_t end = ctx->transports.find(',', at);
      if (end == std::string::npos) end = ctx->transports.size();
      if (ctx->transports.compare(at, end - at, tl) == 0 && !tl.empty()) known = true;
      at = end + 1;
    }
    if (!known && !tl.empty()) ctx->transports += (ctx->transports.empty() ? "" : ",") + tl;
  }
  free(text);
  logf(ctx, collNetLogInfo, "ucx: endpoint %s uses %s", what, lanes.empty() ? "(lanes unknown)" : lanes.c_str());
}
}  // namespace

int fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tLastError, sizeof tLastError, fmt, ap);
  va_end(ap);
  return 1;
}

const char* lastError() { return tLastError; }

void logf(Context* ctx, collNetLogLevel_t level, const char* fmt, ...) {
  if (!ctx || !ctx->log) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  ctx->log(level, line);
}

double nowSec() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

int contextInit(const collNetInit_t* in, Context** out) {
  auto* ctx = new (std::nothrow) Context();
  if (!ctx) return fail("ucx: out of memory creating the plugin context");
  if (in) ctx->log = in->log;
  ucp_config_t* cfg = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &cfg);
  if (st != UCS_OK) {
    destroy(ctx);
    return fail("ucx: ucp_config_read: %s (check the UCX_* environment)", ucs_status_string(st));
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  st = ucp_init(&params, cfg, &ctx->ucp);
  ucp_config_release(cfg);
  if (st != UCS_OK) {
    ctx->ucp = nullptr;
    destroy(ctx);
    return fail("ucx: ucp_init: %s (no usable transport? see UCX_TLS)", ucs_status_string(st));
  }
  // Our own mutex serialises every worker call: one uncontended lock per call, and it
  // also covers the plugin's own per-context state.
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(ctx->ucp, &wp, &ctx->worker);
  if (st != UCS_OK) {
    ctx->worker = nullptr;
    destroy(ctx);
    return fail("ucx: ucp_worker_create: %s", ucs_status_string(st));
  }
  constexpr size_t room = sizeof(WireBlob::address);
  std::vector<uint8_t> full, net;
  if (!queryAddress(ctx, false, full)) return destroy(ctx), 1;
  if (full.size() <= room) {
    ctx->address = std::move(full);
  } else {
    if (!queryAddress(ctx, true, net)) return destroy(ctx), 1;
    if (net.size() > room) {
      size_t fullSize = full.size();
      destroy(ctx);
      return fail("ucx: worker address is %zu bytes (%zu with UCP_WORKER_ADDRESS_FLAG_NET_ONLY), more than "
                  "the %zu a handle holds; narrow UCX_TLS or UCX_NET_DEVICES", fullSize, net.size(), room);
    }
    logf(ctx, collNetLogInfo, "ucx: worker address is %zu bytes, using its %zu-byte network-only form",
         full.size(), net.size());
    ctx->address = std::move(net);
  }
  logf(ctx, collNetLogInfo, "ucx: UCX %s, worker address %zu bytes", ucp_get_version_string(), ctx->address.size());
  *out = ctx;
  return 0;
}

void contextFinalize(Context* ctx) {
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    std::vector<Comm*> left(ctx->comms.begin(), ctx->comms.end());
    if (!left.empty()) logf(ctx, collNetLogInfo, "ucx: finalize closes %zu endpoints left open", left.size());
    for (Comm* c : left) closeComm(c);
    // After a failure only what has finished is collected (UCX drops the rest with the
    // worker; no user memory is involved): the flushes may wait for a peer cut off.
    if (!progressUntil(ctx, [&] {
          reapClosing(ctx);
          return ctx->closing.empty();
        }, ctx->sawFailure ? 0.0 : kCloseTimeoutSec))
      logf(ctx, collNetLogInfo, "ucx: finalize gives up on %zu endpoint closes (peers not responding)",
           ctx->closing.size());
  }
  destroy(ctx);
}

int randomToken(uint64_t* out) {
  size_t got = 0;
  auto* p = reinterpret_cast<unsigned char*>(out);
  while (got < sizeof *out) {
    ssize_t n = getrandom(p + got, sizeof *out - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("ucx: getrandom for a connection token: %s", strerror(errno));
    got += size_t(n);
  }
  return 0;
}

int createEndpoint(Context* ctx, const uint8_t* address, Comm* comm, const char* what) {
  comm->epState.reset(new (std::nothrow) EpState());
  if (!comm->epState) return fail("ucx: out of memory creating an endpoint %s", what);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(address);
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = onEpError;
  ep.err_handler.arg = comm->epState.get();
  ucs_status_t st = ucp_ep_create(ctx->worker, &ep, &comm->ep);
  if (st != UCS_OK) {
    comm->ep = nullptr;
    // Peer error handling admits only transports that notice a dead peer (not posix or
    // sysv shared memory in UCX 1.13), so UCX_TLS=sm alone reaches nothing.
    return fail("ucx: ucp_ep_create %s: %s%s", what, ucs_status_string(st),
                st == UCS_ERR_UNREACHABLE ? " (no UCX transport that detects peer failure reaches it: "
                                            "UCX_TLS needs tcp or an RDMA transport; check UCX_NET_DEVICES)"
                                          : "");
  }
  recordLanes(ctx, comm->ep, what);
  return 0;
}

int closeEndpoint(Context* ctx, Comm* comm, bool force, double deadline) {
  if (!comm->ep) return 0;
  force = force || comm->epState->status.load() != UCS_OK;
  if (force) ctx->sawFailure = true;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t r = ucp_ep_close_nbx(comm->ep, &p);
  comm->ep = nullptr;
  if (r == nullptr || UCS_PTR_IS_ERR(r)) return 0;  // closed (an error only says the peer is gone)
  if (force)
    progressUntil(ctx, [&] { return ucp_request_check_status(r) != UCS_INPROGRESS; },
                  std::max(0.0, deadline - nowSec()));
  // A flushing close needs the peer to progress, which an idle peer does not: it ends in
  // the background (no user memory is involved), and UCX may report on the endpoint
  // until then, so its state stays with the request.
  ctx->closing.push_back({r, std::move(comm->epState)});
  reapClosing(ctx);
  return 0;
}

void reapClosing(Context* ctx) {
  auto& v = ctx->closing;
  for (size_t i = 0; i < v.size();) {
    if (ucp_request_check_status(v[i].request) == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_request_free(v[i].request);
    v[i] = std::move(v.back());
    v.pop_back();
  }
}

}  // namespace coll::net_ucx
