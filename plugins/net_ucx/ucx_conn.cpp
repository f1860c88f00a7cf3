// Connection setup in two steps: listen() hands out this worker's address and a fresh
// token, connect() makes the sender's endpoint and replies with its own address, accept()
// makes the receiver's endpoint back to the sender (only to learn when it dies). Blobs
// are checked (magic, version, bounded length, checksum) before anything is used.
#include <cstring>
#include <new>

#include "ucx_plugin.hpp"

namespace coll::net_ucx {

namespace {

void pack(const Context* ctx, uint32_t magic, uint64_t token, void* out) {
  packBlob(magic, token, ctx->address.data(), ctx->address.size(), out);
}

// Copies and checks a blob from the peer; `what` is "handle" or "reply".
int unpack(const void* in, uint32_t magic, const char* what, WireBlob& b) {
  char why[256];
  if (unpackBlob(in, magic, what, b, why, sizeof why)) return fail("%s", why);
  return 0;
}

int checkDev(int dev) {
  if (dev != 0) return fail("ucx: device %d out of range (the plugin has 1 device, 0)", dev);
  return 0;
}

Comm* newComm(Context* ctx, CommKind kind) {
  auto* c = new (std::nothrow) Comm();
  if (!c) {
    fail("ucx: out of memory creating an endpoint");
    return nullptr;
  }
  c->kind = kind;
  c->ctx = ctx;
  return c;
}

}  // namespace

int listen(Context* ctx, int dev, void* handle, Comm** out) {
  if (checkDev(dev)) return 1;
  uint64_t token = 0;
  // The id routes tags to this endpoint, so it must be unique among the worker's receivers.
  for (int tries = 0; token == 0 || (token & kIdMask) == 0 || ctx->ids.count(token & kIdMask); ++tries) {
    if (tries == 64) return fail("ucx: could not draw an unused connection id");
    if (randomToken(&token)) return 1;
  }
  Comm* c = newComm(ctx, CommKind::Listen);
  if (!c) return 1;
  c->token = token;
  ctx->ids.insert(c->id());
  ctx->comms.insert(c);
  pack(ctx, kHandleMagic, token, handle);
  *out = c;
  return 0;
}

int connect(Context* ctx, int dev, const void* handle, void* reply, Comm** out) {
  if (checkDev(dev)) return 1;
  WireBlob b;
  if (unpack(handle, kHandleMagic, "handle", b)) return 1;
  Comm* c = newComm(ctx, CommKind::Send);
  if (!c) return 1;
  c->token = b.token;
  if (createEndpoint(ctx, b.address, c, "to the receiver")) {
    delete c;
    return 1;
  }
  ctx->comms.insert(c);
  pack(ctx, kReplyMagic, b.token, reply);
  *out = c;
  return 0;
}

int accept(Comm* listenComm, const void* reply, Comm** out) {
  Context* ctx = listenComm->ctx;
  WireBlob b;
  if (unpack(reply, kReplyMagic, "reply", b)) return 1;
  if (b.token != listenComm->token)
    return fail("ucx: the reply answers another listen endpoint (token mismatch)");
  Comm* c = newComm(ctx, CommKind::Recv);
  if (!c) return 1;
  c->token = listenComm->token;
  if (createEndpoint(ctx, b.address, c, "back to the sender")) {
    delete c;
    return 1;
  }
  // The listen endpoint is used up; its connection id passes to the receive endpoint.
  ctx->comms.erase(listenComm);
  listenComm->kind = CommKind::Dead;
  delete listenComm;
  ctx->comms.insert(c);
  *out = c;
  return 0;
}

}  // namespace coll::net_ucx
