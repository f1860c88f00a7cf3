// The C ABI edge: every call validates its arguments, converts exceptions into result
// codes plus a last-error message, and never lets an exception or a bad handle through.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "base/export.hpp"
#include "comm/handles.hpp"
#include "base/log.hpp"
#include "comm/recovery.hpp"
#include "base/shared_mem.hpp"
#include "base/socket.hpp"
#include "base/types.hpp"
#include "comm/user_ops.hpp"
#include "comm/device_ops.hpp"

using namespace coll;

namespace coll {

UniqueIdData makeUniqueIdNear(const sockaddr_storage* near) {
  UniqueIdData id;
  randomSecret(id.secret, kSecretBytes);
  randomSecret(reinterpret_cast<uint8_t*>(&id.jobNonce), sizeof(id.jobNonce));
  const Config cfg = Config::fromEnv();
  const std::string& spec = cfg.getStr("COLL_SOCKET_IFNAME");
  sockaddr_storage addr = near ? chooseLocalAddrFor(*near, spec) : chooseLocalAddr(spec);
  id.root = RendezvousRoot::start(addr, 0, id.secret, timeoutSecOf(cfg));
  return id;
}

}  // namespace coll

namespace {

collResult_t initRank(collComm_t* out, int nranks, const UniqueIdData& id, int rank, const ConfigOverrides& given = {}) {
  auto handle = std::make_unique<collComm>();
  handle->impl = Comm::create(id, rank, nranks, nullptr, given);
#if COLL_HAVE_CUDA
  attachCuda(*handle);
#endif
  *out = handle.release();
  registerHandle(*out);
  return collSuccess;
}

bool streamsUsable(collComm& c) {
#if COLL_HAVE_CUDA
  return c.cudaBackend != nullptr;
#else
  (void)c;
  return false;
#endif
}

OpArgs makeOp(OpKind k, const void* s, void* r, size_t count, collDataType_t dt, collRedOp_t op, int root);

// Validates, then runs or defers (inside a group) one blocking operation. Inside a group a
// stream-ordered op is deferred too: collGroupEnd launches the group as one unit.
collResult_t issue(const char* fn, collComm_t comm, OpArgs op, collStream_t stream) {
  return guarded(comm, fn, [&] {
    collComm& c = liveComm(comm);
    resolveUserOp(&c, op);  // takes the scalar now: a group may run the op after it is destroyed
    validateOp(*c.impl, op, stream, streamsUsable(c));
    if (op.isP2P() && op.root == c.impl->rank() && !groupActive())
      COLL_THROW(collInvalidUsage, "send/recv with self outside a group would never complete");
#if COLL_HAVE_CUDA
    if (onStream(c, op, stream)) {
      if (groupDefer(c, {op, stream, true})) return;
      enqueueOnStream(c, op, stream);
      return;
    }
    drainStreams(c);
#endif
    if (groupDefer(c, {op, nullptr, false})) return;
    IssueGuard busy(c);
    c.impl->run(op);
  });
}

// Nonblocking calls are never deferred by a group. Collectives on device buffers are staged
// on a stream of the communicator's own; the request completes once the results are in
// device memory.
collResult_t issueAsync(const char* fn, collComm_t comm, OpArgs op, collRequest_t* request) {
  return guarded(comm, fn, [&] {
    COLL_CHECK_ARG(request, "request is NULL");
    *request = nullptr;
    collComm& c = liveComm(comm);
    resolveUserOp(&c, op);  // the request carries the scalar: the op may be destroyed meanwhile
    validateOp(*c.impl, op, nullptr, streamsUsable(c));
    if (op.isP2P() && op.root == c.impl->rank())
      COLL_THROW(collInvalidUsage, "nonblocking send/recv with self would never complete");
    IssueGuard busy(c);
    auto r = std::make_unique<collRequest>();
#if COLL_HAVE_CUDA
    if (onStream(c, op, nullptr)) {
      // Staged ops run one after another in issue order: a rank's nonblocking send would
      // have to finish before its receive starts, and a ring of them would deadlock.
      if (op.isP2P())
        COLL_THROW(collInvalidArgument, "nonblocking send/recv take host buffers; for device buffers "
                   "use collSend/collRecv with a stream inside collGroupStart/collGroupEnd");
      r->req = submitDeviceOp(c, op);
    } else {
      drainStreams(c);
      r->req = c.impl->submit({op});
    }
#else
    r->req = c.impl->submit({op});
#endif
    r->comm = &c;
    *request = r.release();
    registerHandle(*request);
  });
}

// An uneven all-to-all as the point-to-point transfers of one group: a send and a
// receive per peer, this rank's own part as a send to self and a receive from self
// (always present, even when empty, so that a nonblocking request runs as one unit
// in issue order with the collectives rather than in the send/recv progress loop).
std::vector<OpArgs> allToAllvOps(const Comm& comm, const void* s, const size_t sc[], const size_t sd[],
                                 void* r, const size_t rc[], const size_t rd[], collDataType_t dt,
                                 const void* stream) {
  const int n = comm.nranks(), me = comm.rank();
  COLL_CHECK_ARG(validType(dt), "datatype ", static_cast<int>(dt), " is not a valid collDataType_t");
  COLL_CHECK_ARG(!stream, "collAllToAllv takes host buffers: stream must be NULL");
  COLL_CHECK_ARG(sc && sd && rc && rd, "sendcounts, sdispls, recvcounts and rdispls must not be NULL");
  const size_t es = typeSize(dt);
  const auto span = [&](size_t count, size_t displ, const char* side, int p) {
    const size_t limit = static_cast<size_t>(PTRDIFF_MAX) / es;
    if (count > limit || displ > limit - count)
      COLL_THROW(collInvalidArgument, side, " part for rank ", p, " (displacement ", displ, ", count ", count,
                 ") lies beyond any buffer");
    return (displ + count) * es;
  };
  size_t sendEnd = 0, recvEnd = 0;
  for (int p = 0; p < n; ++p) {
    if (sc[p]) sendEnd = std::max(sendEnd, span(sc[p], sd[p], "send", p));
    if (rc[p]) recvEnd = std::max(recvEnd, span(rc[p], rd[p], "receive", p));
  }
  COLL_CHECK_ARG(sc[me] == rc[me], "sendcounts[", me, "] = ", sc[me], " differs from recvcounts[", me, "] = ",
                 rc[me], " (this rank's own part)");
  COLL_CHECK_ARG(sendEnd == 0 || s, "sendbuff is NULL with a part to send");
  COLL_CHECK_ARG(recvEnd == 0 || r, "recvbuff is NULL with a part to receive");
  const auto a = reinterpret_cast<uintptr_t>(s), b = reinterpret_cast<uintptr_t>(r);
  if (s != r && sendEnd && recvEnd)
    COLL_CHECK_ARG(a >= b + recvEnd || b >= a + sendEnd,
                   "sendbuff and recvbuff overlap without being the same buffer (in-place)");
  std::vector<OpArgs> ops;
  ops.reserve(2 * n);
  const auto* sb = static_cast<const char*>(s);
  auto* rb = static_cast<char*>(r);
  for (int k = 0; k < n; ++k) {
    // Peers in a rotating order, so that no rank is everyone's first partner.
    const int to = (me + k) % n, from = (me - k + n) % n;
    if (to == me || sc[to]) ops.push_back(makeOp(OpKind::Send, sc[to] ? sb + sd[to] * es : nullptr, nullptr,
                                                 sc[to], dt, collSum, to));
    if (from == me || rc[from]) ops.push_back(makeOp(OpKind::Recv, nullptr, rc[from] ? rb + rd[from] * es : nullptr,
                                                     rc[from], dt, collSum, from));
  }
  return ops;
}

void refuseDeviceParts(collComm& c, const std::vector<OpArgs>& ops) {
#if COLL_HAVE_CUDA
  for (const OpArgs& op : ops)
    if (op.count && onStream(c, op, nullptr))
      COLL_THROW(collInvalidArgument, "collAllToAllv takes host buffers; a part for rank ", op.root,
                 " is in device memory");
#else
  (void)c;
  (void)ops;
#endif
}

OpArgs makeOp(OpKind k, const void* s, void* r, size_t count, collDataType_t dt, collRedOp_t op, int root) {
  OpArgs a;
  a.kind = k;
  a.sendbuf = s;
  a.recvbuf = r;
  a.count = count;
  a.dtype = dt;
  a.op = op;
  a.root = root;
  return a;
}

}  // namespace

extern "C" {

COLL_EXPORT collResult_t collGetVersion(int* version) {
  if (!version) {
    recordError(nullptr, collInvalidArgument, "collGetVersion: version is NULL");
    return collInvalidArgument;
  }
  *version = COLL_VERSION_CODE;
  return collSuccess;
}

COLL_EXPORT collResult_t collMemAlloc(void** ptr, size_t size) {
  return guarded(nullptr, "collMemAlloc", [&] {
    COLL_CHECK_ARG(ptr, "ptr is NULL");
    *ptr = nullptr;
    *ptr = SharedAllocations::instance().allocate(size);
  });
}

COLL_EXPORT collResult_t collMemFree(void* ptr) {
  return guarded(nullptr, "collMemFree", [&] {
    if (ptr) SharedAllocations::instance().release(ptr);
  });
}

COLL_EXPORT const char* collGetErrorString(collResult_t r) {
  switch (r) {
    case collSuccess: return "no error";
    case collInvalidArgument: return "invalid argument";
    case collInvalidUsage: return "invalid usage";
    case collSystemError: return "system error";
    case collRemoteError: return "remote error (a peer failed or disconnected)";
    case collTimeout: return "timeout";
    case collInternalError: return "internal error";
    case collInProgress: return "operation in progress";
    case collUnhandledCudaError: return "unhandled CUDA error";
    case collRevoked: return "communicator revoked";
    default: return "unknown result code";
  }
}

COLL_EXPORT const char* collGetLastError(collComm_t comm) {
  CommUseScope use;
  if (comm && isLiveHandle(comm)) {
    std::lock_guard<std::mutex> lock(comm->errMu);
    if (!comm->lastError.empty()) return comm->lastError.c_str();
    return "no error";
  }
  return threadLastError();
}

COLL_EXPORT size_t collTypeSize(collDataType_t dt) { return typeSize(dt); }

COLL_EXPORT collResult_t collGetUniqueId(collUniqueId* uniqueId) {
  return guarded(nullptr, "collGetUniqueId", [&] {
    COLL_CHECK_ARG(uniqueId, "uniqueId is NULL");
    *uniqueId = makeUniqueIdNear(nullptr).encode();
  });
}

COLL_EXPORT collResult_t collCommInitRank(collComm_t* comm, int nranks, collUniqueId commId, int rank) {
  return guarded(nullptr, "collCommInitRank", [&] {
    COLL_CHECK_ARG(comm, "comm is NULL");
    *comm = nullptr;
    COLL_CHECK_ARG(nranks >= 1, "nranks ", nranks, " must be at least 1");
    COLL_CHECK_ARG(rank >= 0 && rank < nranks, "rank ", rank, " is out of range [0, ", nranks, ")");
    UniqueIdData id = UniqueIdData::decode(commId);
    initRank(comm, nranks, id, rank);
  });
}

namespace {
// "NAME=value" entries of collConfig_t::tunables, up to the NULL that ends the list.
void addTunables(const char* const* list, ConfigOverrides* given) {
  constexpr int kMaxTunables = 1024;  // a list that never ends is a bug, not a config
  for (int i = 0; list && list[i]; ++i) {
    COLL_CHECK_ARG(i < kMaxTunables, "config->tunables has no NULL within ", kMaxTunables, " entries");
    const std::string entry = list[i];
    const size_t eq = entry.find('=');
    COLL_CHECK_ARG(eq != std::string::npos && eq > 0, "config->tunables[", i, "] '", entry,
                   "' is not NAME=value");
    given->emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
}
}  // namespace

COLL_EXPORT collResult_t collCommInitRankConfig(collComm_t* comm, int nranks, collUniqueId commId, int rank,
                                                const collConfig_t* config) {
  return guarded(nullptr, "collCommInitRankConfig", [&] {
    COLL_CHECK_ARG(comm, "comm is NULL");
    *comm = nullptr;
    COLL_CHECK_ARG(nranks >= 1, "nranks ", nranks, " must be at least 1");
    COLL_CHECK_ARG(rank >= 0 && rank < nranks, "rank ", rank, " is out of range [0, ", nranks, ")");
    ConfigOverrides given;
    if (config) {
      COLL_CHECK_ARG(config->magic == COLL_CONFIG_MAGIC,
                     "config was not initialised with COLL_CONFIG_INITIALIZER (magic 0x", std::hex, config->magic,
                     std::dec, ")");
      const size_t known = offsetof(collConfig_t, timeoutSec) + sizeof(int);
      COLL_CHECK_ARG(config->size >= known, "config->size ", config->size, " is smaller than the first version's ",
                     known, " bytes");
      COLL_CHECK_ARG(config->version >= 100, "config->version ", config->version, " is not a version code");
      if (config->timeoutSec != COLL_CONFIG_UNDEF_INT) {
        COLL_CHECK_ARG(config->timeoutSec >= 1 && config->timeoutSec <= 1000000000, "config->timeoutSec ",
                       config->timeoutSec, " is out of range [1, 1000000000]");
        given.emplace_back("COLL_TIMEOUT", std::to_string(config->timeoutSec));
      }
      if (config->size >= offsetof(collConfig_t, tunables) + sizeof(config->tunables))
        addTunables(config->tunables, &given);
    }
    // Names are checked here, before the rendezvous, so that a misspelt one fails this call
    // at once; values are checked where they are read, on every rank alike.
    Config::fromEnv(given);
    UniqueIdData id = UniqueIdData::decode(commId);
    initRank(comm, nranks, id, rank, given);
  });
}

COLL_EXPORT collResult_t collCommInitFromEnv(collComm_t* comm) {
  return guarded(nullptr, "collCommInitFromEnv", [&] {
    COLL_CHECK_ARG(comm, "comm is NULL");
    *comm = nullptr;
    if (const char* join = getenv("COLL_JOIN_ID")) {  // a process started to join through collCommGrow
      auto num = [](const char* name) {
        const char* v = getenv(name);
        COLL_CHECK_ARG(v && *v, "COLL_JOIN_ID is set but ", name, " is not");
        char* end = nullptr;
        const long x = strtol(v, &end, 10);
        COLL_CHECK_ARG(*end == 0 && x >= 0 && x <= (1 << 24), name, "='", v, "' is not a rank count or number");
        return static_cast<int>(x);
      };
      const int nranks = num("COLL_SIZE"), rank = num("COLL_RANK");
      COLL_CHECK_ARG(nranks >= 1 && rank < nranks, "COLL_RANK=", rank, " is outside [0, COLL_SIZE=", nranks, ")");
      initRank(comm, nranks, UniqueIdData::decode(uniqueIdFromHex(join)), rank);
      return;
    }
    EnvLaunch env;
    if (!detectEnvLaunch(&env, timeoutSecOf(Config::fromEnv()))) {
      // Started on its own, as MPI's singletons are: a job of one rank.
      COLL_INFO("collCommInitFromEnv: no launcher environment (collectiverun, mpirun, srun): "
                "running as rank 0 of 1");
      initRank(comm, 1, makeUniqueIdNear(nullptr), 0);
      return;
    }
    COLL_CHECK_ARG(env.nranks >= 1 && env.rank >= 0 && env.rank < env.nranks, "launcher says rank ",
                   env.rank, " of ", env.nranks);
    initRank(comm, env.nranks, env.id, env.rank);
  });
}

COLL_EXPORT collResult_t collCommDestroy(collComm_t comm) {
  return guarded(nullptr, "collCommDestroy", [&] {
    collComm& c = liveComm(comm);
    // Another thread's destroy or abort may have passed the check too: the one whose
    // unregistration removed the handle frees it.
    if (!unregisterHandle(comm))
      COLL_THROW(collInvalidUsage, "comm is being destroyed or aborted by another thread");
    std::unique_ptr<collComm> owned(&c);
#if COLL_HAVE_CUDA
    owned->streams.reset();  // finishes the device ops already issued (up to the timeout)
    owned->ipc.reset();      // then releases the IPC scratch and the peers' mappings
#endif
    owned->impl->destroy();
    // destroy() waited for a call another thread had running, and calls that found the
    // handle live but had not started yet now fail; wait until all of them are out.
    if (!waitUsersGone(owned.get(), 10)) {
      COLL_WARN("collCommDestroy: another thread is still inside a call on this communicator; its memory is left allocated");
      owned.release();
    }
    // Only now can no call of another thread make an op on it any more.
    dropUserOps(&c);
  });
}

COLL_EXPORT collResult_t collCommAbort(collComm_t comm) {
  return guarded(nullptr, "collCommAbort", [&] {
    collComm& c = liveComm(comm);
    if (!unregisterHandle(comm))  // as in collCommDestroy
      COLL_THROW(collInvalidUsage, "comm is being destroyed or aborted by another thread");
    std::unique_ptr<collComm> owned(&c);
#if COLL_HAVE_CUDA
    if (owned->streams) owned->streams->abort();  // fails queued device ops at once
#endif
    try {
      owned->impl->abort("collCommAbort called on rank " + std::to_string(owned->impl->rank()));
    } catch (const std::exception& e) {
      COLL_WARN("abort: %s", e.what());  // abort always succeeds
    }
#if COLL_HAVE_CUDA
    owned->streams.reset();
    owned->ipc.reset();
#endif
    // A call another thread had running fails now and leaves; wait for it to be out.
    if (!waitUsersGone(owned.get(), 10)) {
      COLL_WARN("collCommAbort: another thread is still inside a call on this communicator; its memory is left allocated");
      owned.release();
    }
    // Only now can no call of another thread make an op on it any more.
    dropUserOps(&c);
  });
}

COLL_EXPORT collResult_t collCommCount(const collComm_t comm, int* count) {
  return guarded(comm, "collCommCount", [&] {
    collComm& c = liveComm(comm);
    COLL_CHECK_ARG(count, "count is NULL");
    *count = c.impl->nranks();
  });
}

COLL_EXPORT collResult_t collCommUserRank(const collComm_t comm, int* rank) {
  return guarded(comm, "collCommUserRank", [&] {
    collComm& c = liveComm(comm);
    COLL_CHECK_ARG(rank, "rank is NULL");
    *rank = c.impl->rank();
  });
}

COLL_EXPORT collResult_t collCommGetAsyncError(collComm_t comm, collResult_t* asyncError) {
  return guarded(comm, "collCommGetAsyncError", [&] {
    collComm& c = liveComm(comm);
    COLL_CHECK_ARG(asyncError, "asyncError is NULL");
    *asyncError = c.impl->asyncError();
  });
}

COLL_EXPORT collResult_t collAllReduce(const void* s, void* r, size_t count, collDataType_t dt,
                                       collRedOp_t op, collComm_t comm, collStream_t stream) {
  return issue("collAllReduce", comm, makeOp(OpKind::AllReduce, s, r, count, dt, op, 0), stream);
}

COLL_EXPORT collResult_t collBroadcast(const void* s, void* r, size_t count, collDataType_t dt, int root,
                                       collComm_t comm, collStream_t stream) {
  return issue("collBroadcast", comm, makeOp(OpKind::Broadcast, s, r, count, dt, collSum, root), stream);
}

COLL_EXPORT collResult_t collReduce(const void* s, void* r, size_t count, collDataType_t dt, collRedOp_t op,
                                    int root, collComm_t comm, collStream_t stream) {
  return issue("collReduce", comm, makeOp(OpKind::Reduce, s, r, count, dt, op, root), stream);
}

COLL_EXPORT collResult_t collAllGather(const void* s, void* r, size_t count, collDataType_t dt,
                                       collComm_t comm, collStream_t stream) {
  return issue("collAllGather", comm, makeOp(OpKind::AllGather, s, r, count, dt, collSum, 0), stream);
}

COLL_EXPORT collResult_t collReduceScatter(const void* s, void* r, size_t count, collDataType_t dt,
                                           collRedOp_t op, collComm_t comm, collStream_t stream) {
  return issue("collReduceScatter", comm, makeOp(OpKind::ReduceScatter, s, r, count, dt, op, 0), stream);
}

COLL_EXPORT collResult_t collAllToAll(const void* s, void* r, size_t count, collDataType_t dt,
                                      collComm_t comm, collStream_t stream) {
  return issue("collAllToAll", comm, makeOp(OpKind::AllToAll, s, r, count, dt, collSum, 0), stream);
}

COLL_EXPORT collResult_t collAllToAllv(const void* s, const size_t sc[], const size_t sd[], void* r,
                                       const size_t rc[], const size_t rd[], collDataType_t dt,
                                       collComm_t comm, collStream_t stream) {
  return guarded(comm, "collAllToAllv", [&] {
    collComm& c = liveComm(comm);
    std::vector<OpArgs> ops = allToAllvOps(*c.impl, s, sc, sd, r, rc, rd, dt, stream);
    refuseDeviceParts(c, ops);
    if (groupActive()) {
      for (const OpArgs& op : ops) groupDefer(c, {op, nullptr, false});
      return;
    }
#if COLL_HAVE_CUDA
    drainStreams(c);
#endif
    IssueGuard busy(c);
    c.impl->run(std::move(ops));
  });
}

COLL_EXPORT collResult_t collGather(const void* s, void* r, size_t count, collDataType_t dt, int root,
                                    collComm_t comm, collStream_t stream) {
  return issue("collGather", comm, makeOp(OpKind::Gather, s, r, count, dt, collSum, root), stream);
}

COLL_EXPORT collResult_t collScatter(const void* s, void* r, size_t count, collDataType_t dt, int root,
                                     collComm_t comm, collStream_t stream) {
  return issue("collScatter", comm, makeOp(OpKind::Scatter, s, r, count, dt, collSum, root), stream);
}

COLL_EXPORT collResult_t collSend(const void* s, size_t count, collDataType_t dt, int peer, collComm_t comm,
                                  collStream_t stream) {
  return issue("collSend", comm, makeOp(OpKind::Send, s, nullptr, count, dt, collSum, peer), stream);
}

COLL_EXPORT collResult_t collRecv(void* r, size_t count, collDataType_t dt, int peer, collComm_t comm,
                                  collStream_t stream) {
  return issue("collRecv", comm, makeOp(OpKind::Recv, nullptr, r, count, dt, collSum, peer), stream);
}

COLL_EXPORT collResult_t collBarrier(collComm_t comm) {
  return issue("collBarrier", comm, makeOp(OpKind::Barrier, nullptr, nullptr, 0, collUint8, collMax, 0),
               nullptr);
}

COLL_EXPORT collResult_t collIallReduce(const void* s, void* r, size_t count, collDataType_t dt,
                                        collRedOp_t op, collComm_t comm, collRequest_t* req) {
  return issueAsync("collIallReduce", comm, makeOp(OpKind::AllReduce, s, r, count, dt, op, 0), req);
}

COLL_EXPORT collResult_t collIbroadcast(const void* s, void* r, size_t count, collDataType_t dt, int root,
                                        collComm_t comm, collRequest_t* req) {
  return issueAsync("collIbroadcast", comm, makeOp(OpKind::Broadcast, s, r, count, dt, collSum, root), req);
}

COLL_EXPORT collResult_t collIreduce(const void* s, void* r, size_t count, collDataType_t dt, collRedOp_t op,
                                     int root, collComm_t comm, collRequest_t* req) {
  return issueAsync("collIreduce", comm, makeOp(OpKind::Reduce, s, r, count, dt, op, root), req);
}

COLL_EXPORT collResult_t collIallGather(const void* s, void* r, size_t count, collDataType_t dt,
                                        collComm_t comm, collRequest_t* req) {
  return issueAsync("collIallGather", comm, makeOp(OpKind::AllGather, s, r, count, dt, collSum, 0), req);
}

COLL_EXPORT collResult_t collIreduceScatter(const void* s, void* r, size_t count, collDataType_t dt,
                                            collRedOp_t op, collComm_t comm, collRequest_t* req) {
  return issueAsync("collIreduceScatter", comm, makeOp(OpKind::ReduceScatter, s, r, count, dt, op, 0), req);
}

COLL_EXPORT collResult_t collIallToAll(const void* s, void* r, size_t count, collDataType_t dt,
                                       collComm_t comm, collRequest_t* req) {
  return issueAsync("collIallToAll", comm, makeOp(OpKind::AllToAll, s, r, count, dt, collSum, 0), req);
}

COLL_EXPORT collResult_t collIallToAllv(const void* s, const size_t sc[], const size_t sd[], void* r,
                                        const size_t rc[], const size_t rd[], collDataType_t dt,
                                        collComm_t comm, collRequest_t* request) {
  return guarded(comm, "collIallToAllv", [&] {
    COLL_CHECK_ARG(request, "request is NULL");
    *request = nullptr;
    collComm& c = liveComm(comm);
    std::vector<OpArgs> ops = allToAllvOps(*c.impl, s, sc, sd, r, rc, rd, dt, nullptr);
    refuseDeviceParts(c, ops);
    IssueGuard busy(c);
#if COLL_HAVE_CUDA
    drainStreams(c);
#endif
    auto req = std::make_unique<collRequest>();
    req->req = c.impl->submit(std::move(ops));
    req->comm = &c;
    *request = req.release();
    registerHandle(*request);
  });
}

COLL_EXPORT collResult_t collIgather(const void* s, void* r, size_t count, collDataType_t dt, int root,
                                     collComm_t comm, collRequest_t* req) {
  return issueAsync("collIgather", comm, makeOp(OpKind::Gather, s, r, count, dt, collSum, root), req);
}

COLL_EXPORT collResult_t collIscatter(const void* s, void* r, size_t count, collDataType_t dt, int root,
                                      collComm_t comm, collRequest_t* req) {
  return issueAsync("collIscatter", comm, makeOp(OpKind::Scatter, s, r, count, dt, collSum, root), req);
}

COLL_EXPORT collResult_t collIsend(const void* s, size_t count, collDataType_t dt, int peer, collComm_t comm,
                                   collRequest_t* req) {
  return issueAsync("collIsend", comm, makeOp(OpKind::Send, s, nullptr, count, dt, collSum, peer), req);
}

COLL_EXPORT collResult_t collIrecv(void* r, size_t count, collDataType_t dt, int peer, collComm_t comm,
                                   collRequest_t* req) {
  return issueAsync("collIrecv", comm, makeOp(OpKind::Recv, nullptr, r, count, dt, collSum, peer), req);
}

COLL_EXPORT collResult_t collIbarrier(collComm_t comm, collRequest_t* req) {
  return issueAsync("collIbarrier", comm, makeOp(OpKind::Barrier, nullptr, nullptr, 0, collUint8, collMax, 0),
                    req);
}

COLL_EXPORT collResult_t collTest(collRequest_t* request, int* done) {
  collComm_t comm = nullptr;
  collResult_t result = collSuccess;
  collResult_t rc = guarded(nullptr, "collTest", [&] {
    COLL_CHECK_ARG(request && done, "request and done must not be NULL");
    COLL_CHECK_ARG(*request, "*request is NULL (already completed?)");
    collRequest* r = *request;
    // Another thread may test or wait on the same handle and free it: read it under the
    // registry's lock, and free it only if this call is the one that unregisters it.
    std::shared_ptr<Request> req = liveRequest(r, &comm);
    if (!req) COLL_THROW(collInvalidUsage, "*request is not a live request");
    *done = req->done() ? 1 : 0;
    if (!*done) {
      result = collInProgress;
      return;
    }
    if (!unregisterHandle(r)) {
      *done = 0;
      COLL_THROW(collInvalidUsage, "*request was completed and released by another thread's collWait or collTest");
    }
    result = req->result();
    if (result != collSuccess) recordError(comm, result, req->message().c_str());
    delete r;
    *request = nullptr;
  });
  return rc != collSuccess ? rc : result;
}

COLL_EXPORT collResult_t collWait(collRequest_t* request) {
  collComm_t comm = nullptr;
  collResult_t result = collSuccess;
  collResult_t rc = guarded(nullptr, "collWait", [&] {
    COLL_CHECK_ARG(request, "request is NULL");
    COLL_CHECK_ARG(*request, "*request is NULL (already completed?)");
    collRequest* r = *request;
    // As in collTest: another thread waiting on the same handle may free it first.
    std::shared_ptr<Request> req = liveRequest(r, &comm);
    if (!req) COLL_THROW(collInvalidUsage, "*request is not a live request");
    double timeout = isLiveHandle(comm) ? comm->impl->timeoutSec() * 2 : 600;
    if (!req->wait(timeout)) COLL_THROW(collTimeout, "collWait: request did not complete in ", timeout, " s");
    if (!unregisterHandle(r))
      COLL_THROW(collInvalidUsage, "*request was completed and released by another thread's collWait or collTest");
    result = req->result();
    if (result != collSuccess) recordError(comm, result, req->message().c_str());
    delete r;
    *request = nullptr;
  });
  return rc != collSuccess ? rc : result;
}

}  // extern "C"
