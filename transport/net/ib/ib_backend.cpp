// The built-in InfiniBand verbs backend of the `net` transport (plugins/net/coll_net.h).
//
// Protocol, per one-way connection (COLL_IB_QPS RC queue pairs per port on each side, on
// COLL_IB_PORTS ports: QP i on port i % ports, a CQ per device; QP 0 on the rank's port):
//  - Several ports: the handle and reply follow their ConnInfo with a ConnPorts (each
//    QP's port, each port's LID/GID/MTU; ib_wire.hpp), zero for one port. The handle's QP
//    count holds; a sender with fewer ports puts them round-robin on its own. Zero-copy
//    buffers are registered on every device of the connection, and a receiver on
//    several ports sends a key per port in its region (CtsPorts).
//  - Both sides own COLL_IB_SLOTS registered bounce slots of COLL_IB_CHUNK bytes. The
//    receiver posts a RECV on each of its slots on QP 0 already in listen(); the handle
//    carries its QP numbers, PSNs, LID/GID, MTU, slot shape, the zero-copy cut-over and
//    a random token, and the reply the sender's QP numbers, PSNs, LID/GID, the cut-over
//    it will use (the handle's, or 0 for none) and the echoed token.
//  - Every message starts with a 24-byte header {size, tag, kind, seq} in a slot on QP 0.
//    An eager message (smaller than the cut-over) follows it piece by piece, one SEND per
//    slot; the receiver copies each piece into the user's buffer (only up to the
//    receive's size; the true size is reported) and reposts the slot.
//  - A zero-copy message (the cut-over or more) sends its header alone: a request to
//    send. The receiver registers its buffer (registration cache, reg_cache.hpp) and
//    sends a region {seq, address, length, rkey} back on QP 0 (a SEND into receives the
//    sender keeps posted); it does so already when the receive is posted with a size of
//    the cut-over or more, so a sender that finds the region there writes at once. The
//    sender splits min(size, length) into one page-aligned stripe per QP and RDMA-writes
//    each from its own registered buffer, the last write of each QP with its message
//    number as immediate data. The receiver's message is complete when it has the header
//    and one immediate per QP: completion by immediate, not by arrival order, so the QPs
//    (and adaptive routing within one) may deliver in any order. A region for a message
//    that turned out eager is dropped by the sender.
//  - Credits: the sender holds one per receiver slot and spends one per SEND and per
//    write with immediate on QP 0 (it consumes a slot's RECV), so each always finds a
//    RECV posted (no reliance on receiver-not-ready retries); a zero-copy header takes
//    its write's credit with its own, so later headers cannot starve it. The receiver
//    returns them in batches as a 0-byte SEND-with-immediate (the count). On the other
//    QPs the receiver posts the RECV for a message's write with immediate before it
//    sends the region, so one is always there too.
//  - A send completes when its last SEND and write have completed (the peer's NIC has
//    them), so closing right after is safe; a receive when its last piece has been copied
//    out, or its last write has landed.
//  - Every failed completion fails the endpoint; its requests then fail in test().
#include <algorithm>
#include <cstring>
#include <string>

#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "transport/net/ib/ib_comm.hpp"
#include "transport/net/ib/ib_counters.hpp"
#include "transport/net/net_backend.hpp"

COLL_PARAM(kIbHca, "COLL_IB_HCA", "", "InfiniBand: ports to use, e.g. 'mlx5_0:1,mlx5_1' ('^' first: all but these; empty: all)");
// RoCE only; InfiniBand ports use LID addressing.
COLL_PARAM(kIbGidIndex, "COLL_IB_GID_INDEX", "-1", "RoCE: GID index to send from (-1: a RoCE v2 IPv4-mapped GID if any, else v2, else the first set)");
COLL_PARAM(kIbChunk, "COLL_IB_CHUNK", "128K", "InfiniBand: bytes per bounce slot (one SEND each)");
COLL_PARAM(kIbSlots, "COLL_IB_SLOTS", "16", "InfiniBand: bounce slots per connection (the sender's credits)");
COLL_PARAM(kIbQps, "COLL_IB_QPS", "1", "InfiniBand: queue pairs per connection; zero-copy messages are striped over them");
COLL_PARAM(kIbPorts, "COLL_IB_PORTS", "1", "InfiniBand: ports each connection spreads its queue pairs (COLL_IB_QPS on each) and zero-copy stripes over: the rank's own first, then the closest others COLL_IB_HCA allows");
COLL_PARAM(kIbZcopy, "COLL_IB_ZCOPY", "1", "InfiniBand: 1: large messages move by RDMA write straight between the user's buffers; 0: every byte through the bounce slots");
// The measured cross-over of the eager and zero-copy paths: perf/net/ib_model (doc/benchmarks.md).
COLL_PARAM(kIbZcopyMin, "COLL_IB_ZCOPY_MIN", "32K", "InfiniBand: messages of this size or more move zero-copy");
COLL_PARAM(kIbRegCache, "COLL_IB_REG_CACHE", "auto", "InfiniBand: keep registrations of user buffers for reuse: auto (where they can be kept true: on-demand paging, or a page check), off");
COLL_PARAM(kIbRegCacheMax, "COLL_IB_REG_CACHE_MAX", "4G", "InfiniBand: registered bytes of user buffers kept while unused (least recently used first out)");
COLL_PARAM(kIbTimeout, "COLL_IB_TIMEOUT", "20", "InfiniBand: ack timeout, 4.096 us * 2^n");
COLL_PARAM(kIbRetry, "COLL_IB_RETRY_CNT", "7", "InfiniBand: retransmissions before a send fails");
COLL_PARAM(kIbSl, "COLL_IB_SL", "0", "InfiniBand: service level");
COLL_PARAM(kIbTc, "COLL_IB_TC", "0", "RoCE: traffic class");

namespace coll::net::ib {
namespace {

constexpr uint64_t kMaxBufferBytes = 1ull << 30;

thread_local std::string tLastError = "no error";

struct Context {
  uint32_t magic = kContextMagic;
  const VerbsOps* ops = nullptr;
  Tunables tun;
  std::vector<Port> ports;
  std::shared_ptr<CounterTotals> totals = std::make_shared<CounterTotals>();
  ~Context() { magic = 0; }
};

struct ListenComm {
  uint32_t magic = kListenMagic;
  std::unique_ptr<RecvComm> recv;
  ~ListenComm() { magic = 0; }
};

template <typename F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    tLastError = e.what();
  } catch (...) {
    tLastError = "InfiniBand: unknown error";
  }
  return 1;
}

template <typename T>
T* checked(void* p, uint32_t magic, const char* what) {
  COLL_CHECK_ARG(p, "InfiniBand: ", what, " is NULL");
  T* t = static_cast<T*>(p);
  COLL_CHECK_ARG(t->magic == magic, "InfiniBand: ", what, " is not one (closed, or another kind of object)");
  return t;
}

int64_t intIn(const Config& c, const char* env, int64_t lo, int64_t hi) {
  int64_t v = c.getInt(env);
  COLL_CHECK_ARG(v >= lo && v <= hi, env, "=", v, " is outside ", lo, "..", hi);
  return v;
}

Tunables readTunables(const Config& c) {
  Tunables t;
  t.hca = c.getStr(kIbHca);
  t.gidIndex = int(intIn(c, kIbGidIndex, -1, 1 << 20));
  size_t chunk = c.getSize(kIbChunk);
  COLL_CHECK_ARG(chunk >= kMinChunk && chunk <= kMaxChunk, kIbChunk, "=", c.getStr(kIbChunk),
                 " is outside ", kMinChunk, "..", kMaxChunk, " bytes");
  t.chunk = uint32_t(chunk);
  t.slots = uint32_t(intIn(c, kIbSlots, 1, kMaxSlots));
  COLL_CHECK_ARG(uint64_t(t.chunk) * t.slots <= kMaxBufferBytes, kIbChunk, " x ", kIbSlots,
                 " = ", uint64_t(t.chunk) * t.slots, " bytes per connection is over 1 GiB");
  t.qps = uint32_t(intIn(c, kIbQps, 1, kMaxQps));
  t.ports = uint32_t(intIn(c, kIbPorts, 1, kMaxPorts));
  COLL_CHECK_ARG(t.ports * t.qps <= kMaxQps, kIbPorts, "=", t.ports, " x ", kIbQps, "=", t.qps, " = ",
                 t.ports * t.qps, " queue pairs per connection is over ", kMaxQps);
  t.zcopy = intIn(c, kIbZcopy, 0, 1) == 1;
  t.zcopyMin = c.getSize(kIbZcopyMin);
  COLL_CHECK_ARG(t.zcopyMin >= 1, kIbZcopyMin, "=", c.getStr(kIbZcopyMin), " must be at least 1 byte");
  const std::string& cache = c.getStr(kIbRegCache);
  COLL_CHECK_ARG(cache == "auto" || cache == "off", kIbRegCache, " must be auto or off (got '", cache, "')");
  t.regCache = cache == "auto";
  t.regCacheMax = c.getSize(kIbRegCacheMax);
  t.timeout = uint8_t(intIn(c, kIbTimeout, 1, 31));
  t.retry = uint8_t(intIn(c, kIbRetry, 0, 7));
  t.sl = uint8_t(intIn(c, kIbSl, 0, 15));
  t.tc = uint8_t(intIn(c, kIbTc, 0, 255));
  return t;
}

Context* ctxOf(void* context) { return checked<Context>(context, kContextMagic, "context"); }

const Port& portOf(Context* c, int dev) {
  COLL_CHECK_ARG(dev >= 0 && size_t(dev) < c->ports.size(), "InfiniBand: device ", dev,
                 " does not exist (", c->ports.size(), " devices)");
  return c->ports[size_t(dev)];
}

// The ports a connection on device `dev` uses: `dev` first, then the closest others,
// `n` in all (ib_devices.hpp: portsNear).
std::vector<Port> portsFor(Context* c, int dev, uint32_t n) {
  const Port& first = portOf(c, dev);
  std::vector<size_t> near = portsNear(c->ports, size_t(dev), n);
  COLL_CHECK_ARG(near.size() == n, "InfiniBand ", first.name, ": ", kIbPorts, "=", c->tun.ports, " needs ", n,
                 " ports of its link layer (", first.roce() ? "Ethernet" : "InfiniBand", "), ", near.size(),
                 " usable here");
  std::vector<Port> out;
  for (size_t i : near) out.push_back(c->ports[i]);
  return out;
}

// The device's registration cache; returns the line that says how it keeps entries true.
std::string setUpMemory(Device& d, const Tunables& t) {
  MemoryOptions opt;
  opt.cache = t.regCache;
  opt.maxIdleBytes = t.regCacheMax;
  std::string why;
  CacheMode mode = chooseCacheMode(*d.ops, d.ctx, opt, &why);
  d.mem = std::make_unique<DeviceMemory>(*d.ops, d.pd, mode, opt);
  // GPUDirect RDMA (device memory registered with the NIC) is not implemented.
  const char* gpu = COLL_HAVE_CUDA ? "; GPUDirect RDMA not used: device buffers are staged through host memory" : "";
  if (!t.zcopy)
    return strCat("InfiniBand ", d.name, ": zero-copy off (COLL_IB_ZCOPY=0): every byte through the bounce slots", gpu);
  return strCat("InfiniBand ", d.name, ": zero-copy from ", t.zcopyMin, " bytes over ", t.qps,
                " queue pair(s) per connection", t.ports > 1 ? strCat(" on each of ", t.ports, " ports") : "",
                "; registration cache: ", why, gpu);
}

int initWith(const Config& cfg, const collNetInit_t* in, void** context) {
  return guarded([&] {
    COLL_CHECK_ARG(context, "InfiniBand init: context is NULL");
    *context = nullptr;
    auto c = std::make_unique<Context>();
    c->ops = &currentVerbsOps();
    c->tun = readTunables(cfg);
    c->ports = discoverPorts(*c->ops, {c->tun.hca, c->tun.gidIndex});
    COLL_CHECK_ARG(c->tun.ports <= c->ports.size(), "InfiniBand: ", kIbPorts, "=", c->tun.ports,
                   " asks for more ports per connection than the ", c->ports.size(), " usable here",
                   c->tun.hca.empty() ? "" : strCat(" (", kIbHca, "=", c->tun.hca, ")"));
    auto say = [&](const std::string& line) {
      if (in && in->log) in->log(collNetLogInfo, line.c_str());
      else COLL_INFO("%s", line.c_str());
    };
    for (const Port& p : c->ports) {
      say(strCat("InfiniBand ", p.name, ": ", p.roce() ? "RoCE" : "InfiniBand", ", ", p.speedMbps, " Mb/s, MTU ",
                 128 << p.mtu, p.roce() ? strCat(", GID index ", p.gidIndex) : strCat(", LID ", p.lid),
                 p.pciPath.empty() ? "" : ", PCI " + p.pciPath));
      if (!p.dev->mem) say(setUpMemory(*p.dev, c->tun));
    }
    *context = c.release();
  });
}

// The plugin interface's init: the tunables from the environment.
int ibInit(const collNetInit_t* in, void** context) { return initWith(Config::fromEnv(), in, context); }

int ibDevices(void* context, int* ndev) {
  return guarded([&] {
    Context* c = ctxOf(context);
    COLL_CHECK_ARG(ndev, "InfiniBand devices: ndev is NULL");
    *ndev = int(c->ports.size());
  });
}

int ibGetProperties(void* context, int dev, collNetProperties_t* props) {
  return guarded([&] {
    const Port& p = portOf(ctxOf(context), dev);
    COLL_CHECK_ARG(props, "InfiniBand getProperties: props is NULL");
    memset(props, 0, sizeof(*props));
    snprintf(props->name, sizeof(props->name), "%s", p.name.c_str());
    snprintf(props->pciPath, sizeof(props->pciPath), "%s", p.pciPath.c_str());
    props->speedMbps = p.speedMbps;
    // A typical RC send/receive one-way latency; RoCE adds an Ethernet switch hop.
    props->latencyUs = p.roce() ? 3.0 : 2.0;
    props->maxRequests = kMaxRequests;
  });
}

int ibListen(void* context, int dev, void* handle, void** listenComm) {
  return guarded([&] {
    Context* c = ctxOf(context);
    COLL_CHECK_ARG(handle && listenComm, "InfiniBand listen: handle or listenComm is NULL");
    const Tunables& t = c->tun;
    QpShape shape;
    shape.nqps = t.qps * t.ports;
    shape.chunk = t.chunk;
    shape.slots = t.slots;
    shape.ctrl = kCtsDepth;  // regions go out from these
    shape.send0 = t.slots + kCtsDepth;  // credit returns, regions
    shape.recv0 = t.slots;
    shape.recvN = kCtsDepth;  // a write with immediate per region in flight
    shape.remoteWrite = t.zcopy;
    auto qp = std::make_unique<QpSet>(portsFor(c, dev, t.ports), t, shape);
    qp->token = randomU64();
    ConnInfo info;
    ConnPorts where;
    qp->describe(&info, &where, kConnHandle);
    // A zero-copy message takes two credits at once (ib_send.cpp): one slot cannot.
    info.zcopyMin = t.zcopy && t.slots >= 2 ? t.zcopyMin : 0;
    auto l = std::make_unique<ListenComm>();
    l->recv = std::make_unique<RecvComm>(std::move(qp), c->totals, info.zcopyMin);
    memset(handle, 0, COLL_NET_HANDLE_BYTES);
    memcpy(handle, &info, sizeof(info));
    memcpy(static_cast<char*>(handle) + sizeof(info), &where, sizeof(where));
    *listenComm = l.release();
  });
}

int ibConnect(void* context, int dev, const void* handle, void* reply, void** sendComm) {
  return guarded([&] {
    Context* c = ctxOf(context);
    const Port& p = portOf(c, dev);
    COLL_CHECK_ARG(reply && sendComm, "InfiniBand connect: reply or sendComm is NULL");
    ConnInfo peer;
    PeerPorts peerPorts;
    std::string bad = checkConnInfo(handle, kConnHandle, &peer, &peerPorts);
    if (!bad.empty()) COLL_THROW(collInvalidArgument, "InfiniBand connect on ", p.name, ": ", bad);
    if (uint64_t(peer.chunk) * peer.slots > kMaxBufferBytes)
      COLL_THROW(collInvalidArgument, "InfiniBand connect on ", p.name, ": the handle asks for ",
                 peer.slots, " slots of ", peer.chunk, " bytes, over 1 GiB");
    QpShape shape;
    shape.nqps = peer.nqps;
    shape.chunk = peer.chunk;
    shape.slots = peer.slots;
    shape.ctrl = peer.slots + kCtsDepth;  // credits and regions land in these
    shape.send0 = peer.slots + kWriteDepth;
    shape.recv0 = peer.slots + kCtsDepth;
    shape.sendN = kWriteDepth;
    // The receiver's queue pairs, spread over as many of this side's ports as it may use
    // (a peer with another COLL_IB_PORTS pairs them round-robin all the same).
    auto qp = std::make_unique<QpSet>(portsFor(c, dev, std::min(c->tun.ports, peer.nqps)), c->tun, shape);
    qp->token = peer.token;
    // The receiver's cut-over, unless this side has zero-copy off.
    const uint64_t zcopyMin = c->tun.zcopy ? peer.zcopyMin : 0;
    auto s = std::make_unique<SendComm>(std::move(qp), c->totals, zcopyMin);
    s->qp().connectTo(peer, peerPorts);
    ConnInfo mine;
    ConnPorts where;
    s->qp().describe(&mine, &where, kConnReply);
    mine.zcopyMin = zcopyMin;
    memset(reply, 0, COLL_NET_HANDLE_BYTES);
    memcpy(reply, &mine, sizeof(mine));
    memcpy(static_cast<char*>(reply) + sizeof(mine), &where, sizeof(where));
    *sendComm = s.release();
  });
}

int ibAccept(void* listenComm, const void* reply, void** recvComm) {
  return guarded([&] {
    ListenComm* l = checked<ListenComm>(listenComm, kListenMagic, "listen endpoint");
    COLL_CHECK_ARG(recvComm, "InfiniBand accept: recvComm is NULL");
    QpSet& qp = l->recv->qp();
    ConnInfo peer;
    PeerPorts peerPorts;
    std::string bad = checkConnInfo(reply, kConnReply, &peer, &peerPorts);
    if (!bad.empty()) COLL_THROW(collInvalidArgument, "InfiniBand accept on ", qp.name(), ": ", bad);
    if (peer.token != qp.token)
      COLL_THROW(collInvalidArgument, "InfiniBand accept on ", qp.name(), ": the reply from ", peer.port,
                 " does not answer this endpoint's handle (token mismatch)");
    if (peer.chunk != qp.chunk() || peer.slots != qp.slots())
      COLL_THROW(collInvalidArgument, "InfiniBand accept on ", qp.name(), ": the sender ", peer.port,
                 " uses ", peer.slots, " slots of ", peer.chunk, " bytes, this side ", qp.slots(),
                 " of ", qp.chunk());
    l->recv->accept(peer, peerPorts);
    *recvComm = l->recv.release();
    delete l;
  });
}

int ibIsend(void* sendComm, const void* data, size_t size, uint64_t tag, void** request) {
  return guarded([&] {
    SendComm* s = checked<SendComm>(sendComm, kSendMagic, "send endpoint");
    COLL_CHECK_ARG(request, "InfiniBand isend: request is NULL");
    *request = nullptr;
    COLL_CHECK_ARG(data || size == 0, "InfiniBand isend: data is NULL for ", size, " bytes");
    *request = s->post(data, size, tag);
  });
}

int ibIrecv(void* recvComm, void* data, size_t size, void** request) {
  return guarded([&] {
    RecvComm* r = checked<RecvComm>(recvComm, kRecvMagic, "receive endpoint");
    COLL_CHECK_ARG(request, "InfiniBand irecv: request is NULL");
    *request = nullptr;
    COLL_CHECK_ARG(data || size == 0, "InfiniBand irecv: data is NULL for ", size, " bytes");
    *request = r->post(data, size);
  });
}

int ibTest(void* request, int* done, size_t* size, uint64_t* tag) {
  return guarded([&] {
    Request* r = checked<Request>(request, kRequestMagic, "request");
    COLL_CHECK_ARG(done, "InfiniBand test: done is NULL");
    *done = 0;
    *done = r->comm->test(r, size, tag) ? 1 : 0;
  });
}

int ibCloseSend(void* sendComm) {
  return guarded([&] { delete checked<SendComm>(sendComm, kSendMagic, "send endpoint"); });
}

int ibCloseRecv(void* recvComm) {
  return guarded([&] { delete checked<RecvComm>(recvComm, kRecvMagic, "receive endpoint"); });
}

int ibCloseListen(void* listenComm) {
  return guarded([&] { delete checked<ListenComm>(listenComm, kListenMagic, "listen endpoint"); });
}

const char* ibLastError(void*) { return tLastError.c_str(); }

Comm* commOf(void* comm) {
  COLL_CHECK_ARG(comm, "InfiniBand: endpoint is NULL");
  auto* c = static_cast<Comm*>(comm);
  COLL_CHECK_ARG(c->magic == kSendMagic || c->magic == kRecvMagic, "InfiniBand: not an endpoint");
  return c;
}

// Endpoints still open keep their device (and its context and PD) alive.
void ibFinalize(void* context) {
  if (context && static_cast<Context*>(context)->magic == kContextMagic) delete static_cast<Context*>(context);
}

const collNetPlugin_v1_t kPlugin = {
    COLL_NET_PLUGIN_VERSION, "ib", ibInit, ibDevices, ibGetProperties, ibListen, ibConnect,
    ibAccept, ibIsend, ibIrecv, ibTest, ibCloseSend, ibCloseRecv, ibCloseListen, ibLastError,
    ibFinalize,
};

}  // namespace
}  // namespace coll::net::ib

namespace coll::net::ib {
ByteCounts endpointCounts(void* comm) { return commOf(comm)->counts(); }
ByteCounts contextSent(void* context) { return ctxOf(context)->totals->sent(); }
ByteCounts contextReceived(void* context) { return ctxOf(context)->totals->received(); }
CacheStats contextCacheStats(void* context, int dev) { return portOf(ctxOf(context), dev).dev->mem->cache().stats(); }
}  // namespace coll::net::ib

namespace coll::net {
const collNetPlugin_v1_t* ibBackend() { return &ib::kPlugin; }
int ibBackendInit(const Config& cfg, const collNetInit_t* in, void** context) { return ib::initWith(cfg, in, context); }
}  // namespace coll::net
