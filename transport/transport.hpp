// The transport interface: everything above it speaks of ranks and byte ranges, never of
// sockets or shared memory.
//
// A Link is a bidirectional, ordered connection to one peer. Sends are matched to
// receives by order per direction (the n-th send posted on rank A's link to B lands in
// the n-th receive B posts on its link to A); both sizes must agree, and a transport
// reports a mismatch as collRemoteError instead of corrupting memory. Messages also
// carry their call's signature (Xfer::call), compared the same way.
// Links are not thread-safe: one thread at a time posts and progresses a link.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collective.h"
#include "topology/path.hpp"

namespace coll {

class Bootstrap;
class Config;
class Deadline;

// What an algorithm may ask of a transfer beyond moving its bytes. A transport honours
// each where it can (today the shm links) and may ignore them otherwise, except a reducing
// receive (`with`), which callers post only on links that said yes to it.
struct XferHints {
  // Receives: the sender may write part of the message into buf itself, in parallel with
  // the receiver (shm cooperative single-copy). For receives whose sender would
  // otherwise just wait (broadcast, send/recv); not where both sides are busy and the
  // receiver wants the bytes in its own cache (ring reductions).
  bool assist = false;
  // Receives: buf is a final output that the caller does not read again soon (no later
  // step forwards or reduces it) and too large to stay in cache (algorithms/exec.hpp,
  // coldOutput), so the transport may write it past the cache (streaming stores: no read
  // of the destination's lines before they are overwritten).
  // Sends with a mirror: the same of the mirror, which is then part of an output too
  // large to stay in cache; otherwise the mirror is written through the cache.
  bool cold = false;
  // Sends on links whose copiesMirror() is true: the transport also copies the message
  // into mirror (the sender's own copy of the data, as an out-of-place all-gather
  // keeps), piece by piece while each piece is in cache from the send, and has done so
  // by the time the send completes. Must not overlap buf.
  void* mirror = nullptr;
  // Sends: the receiver reduces this message with its own data as it arrives and the
  // sender has nothing else to do meanwhile (the sends of a reduction toward a root). A
  // shm link that chooses the way by measurement sends it through the ring then: the
  // sender's copy into the ring runs beside the receiver's reduction out of it, where a
  // single copy would leave both the copy and the reduction to the receiver.
  bool intoReduction = false;
  // Receives on links whose reducesOnReceive() is true: with `with` set, the transport
  // stores reduceBuffers(with, incoming) (base/reduce.hpp: a = with, b = the peer's
  // bytes) into buf, in the same pass that reads the incoming bytes, instead of storing
  // them. buf may equal with; bytes must be a whole number of `dtype` elements.
  const void* with = nullptr;
  collDataType_t dtype = collFloat32;
  collRedOp_t op = collSum;
};

// One posted send or receive. The memory and the Xfer itself stay valid until complete.
struct Xfer {
  void* buf = nullptr;  // send: read from here; receive: written here
  size_t bytes = 0;
  size_t done = 0;       // bytes moved so far (written by the transport)
  bool complete = false; // set by the transport when all bytes have moved
  // The signature of the call this transfer belongs to (base/call_sig.hpp): sends carry
  // it, and a receive whose incoming message carries another fails with
  // collInvalidUsage naming both calls. 0: not stamped (matches anything).
  uint64_t call = 0;
  XferHints hints = {};
  // Sends: when it was posted, where the transport times its deliveries (shm links that
  // choose the way by measurement); the transport's own.
  uint64_t postedNs = 0;
};

class Link {
 public:
  virtual ~Link() = default;
  virtual void postSend(Xfer* x) = 0;
  virtual void postRecv(Xfer* x) = 0;
  // Moves bytes of posted transfers without blocking; true if anything moved.
  // Throws coll::Error (collRemoteError when the peer closed, died or sent bad data).
  virtual bool progress() = 0;
  // Blocks up to timeoutMs for this link to have something to do (poll on a socket, a
  // futex on a flag); may return early. Used by waiters after spinning.
  virtual void waitActivity(int timeoutMs) { (void)timeoutMs; }
  // Whether the peer last waited on CPU `cpu`, the caller's own, as far as the link can
  // tell (false when it cannot); also tells the peer that this side waits on `cpu`. A
  // waiter spinning on a peer that needs its CPU to run only delays it: it blocks instead.
  virtual bool peerSharesCpu(int cpu) { (void)cpu; return false; }
  // Appends the descriptors whose readiness means this link has work (the same events
  // waitActivity would wait for), so a waiter can sleep on several links with one poll.
  // Returns false when the link cannot be waited on through descriptors.
  virtual bool appendPollFds(std::vector<pollfd>* fds) { (void)fds; return false; }
  virtual const char* transportName() const = 0;
  // Whether a posted send or receive has not completed yet: which peers an operation
  // that timed out was still waiting on.
  virtual bool pending() const = 0;
  // The call signature (Xfer::call) of the next incoming message when its header has
  // arrived and no receive is posted for it; 0 otherwise (or when the transport cannot
  // tell). Lets a waiter see a message that its call will never claim.
  virtual uint64_t unclaimedCall() { return 0; }
  // The operation using this link failed and its transfers are being given up: from here
  // on the transport must not touch their memory (the caller returns to the user, who
  // may free it). Transports that move bytes only inside progress() need do nothing;
  // ones whose fabric may still read or write posted buffers cancel them. The link is
  // not used for transfers again.
  virtual void abandon() {}
  // Memory the link maps for its own use (shared rings), for the per-communicator report.
  virtual size_t memoryBytes() const { return 0; }
  // Whether sends honour Xfer::mirror; callers of links that do not copy it themselves.
  virtual bool copiesMirror() const { return false; }
  // Whether receives that reduce with `with` (`bytes` long) are best posted as reducing
  // receives (Xfer::with): the link then reads the incoming bytes once, in the reduction.
  // Links that answer false may not be given such receives; callers receive into a buffer
  // of their own and reduce afterwards.
  virtual bool reducesOnReceive(const void* with, size_t bytes) const {
    (void)with;
    (void)bytes;
    return false;
  }
};

// What a transport gets to set itself up; owned by the communicator.
struct TransportContext {
  int rank = 0;
  int nranks = 0;
  const Config* cfg = nullptr;
  Bootstrap* bootstrap = nullptr;      // for exchanging connection info
  std::vector<std::string> hostIds;    // per rank; equal strings = same host
  std::vector<int> pids;               // per rank
  std::string jobTag;                  // short unique tag of this communicator (hex), for names
  const uint8_t* secret = nullptr;     // 32-byte job secret; connections must prove it
  const std::atomic<bool>* cancel = nullptr;  // waits for peers fail once it turns true
  sockaddr_storage root{};             // the rendezvous root: pick interfaces that reach it
  std::string nic;                     // the NIC the topology chose for this rank ("" none)
  double timeoutSec = 300;
};

// Links made when an algorithm first needs them (Transport::prepare). Both ends of a pair
// call connect() for each other, in whatever order their algorithms reach the pair, so
// connect() must never wait for the peer's algorithm (a link may accept posts before the
// peer has arrived, and finish connecting in progress()). What a link answers to
// copiesMirror() and reducesOnReceive() must not depend on whether it is connected yet.
class LinkFactory {
 public:
  virtual ~LinkFactory() = default;
  // The link to `peer`, one of the peers given to prepare; waits (for a listener to
  // answer, say) are bounded by `deadline`.
  virtual std::unique_ptr<Link> connect(int peer, const Deadline& deadline) = 0;
  // Descriptors the factory holds open (listeners, wake-ups), for reports.
  virtual size_t descriptors() const { return 0; }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Like connect(), collective over ctx.bootstrap, but makes no link yet: returns what
  // makes them on first use, or null where this transport connects only eagerly (then
  // the caller uses connect()). ctx.bootstrap, ctx.secret and ctx.cfg must outlive the
  // factory; ctx.cancel is not kept.
  virtual std::unique_ptr<LinkFactory> prepare(const TransportContext& ctx, const std::vector<int>& peers) {
    (void)ctx;
    (void)peers;
    return nullptr;
  }
  // Collective over ctx.bootstrap: every rank calls it (with a possibly empty peer list)
  // so that the bootstrap exchanges stay in step. Returns a link per requested peer.
  // The set of peers must be symmetric: a in peers(b) <=> b in peers(a).
  virtual std::map<int, std::unique_ptr<Link>> connect(const TransportContext& ctx,
                                                       const std::vector<int>& peers) = 0;
};

// Registered transports by name ("tcp", "shm", "net"): nullptr if unknown or not built.
std::unique_ptr<Transport> makeTransport(const std::string& name);

// Which transport serves each peer of `rank` under COLL_TRANSPORT=`mode` (auto, tcp, shm,
// net). The rule gives both ends of a pair the same answer. hostIds and hostnames: per
// rank. netBackends: per rank, the name of the network backend it can use ("" none) and
// netWhy why not; empty when the offers were not exchanged (no rank needs them).
struct TransportChoice {
  std::vector<std::string> perPeer;  // "" for `rank` itself
  bool anyNet = false;               // some pair of ranks uses net (the same on every rank)
  // How each rank reaches other hosts, for the cost model (JobTopo::setNetPaths; the same
  // on every rank): Bypass where it uses the built-in InfiniBand backend (name "ib"),
  // Kernel where it has no backend or tcp is forced, Unknown for a plugin backend.
  std::vector<NetPath> netPaths;
};
TransportChoice chooseTransports(const std::string& mode, int rank, const std::vector<std::string>& hostIds,
                                 const std::vector<std::string>& hostnames,
                                 const std::vector<std::string>& netBackends,
                                 const std::vector<std::string>& netWhy);
// COLL_TRANSPORT, as cfg has it: auto, tcp, shm or net (the tunable is declared with
// the transports, which it chooses among).
const std::string& transportMode(const Config& cfg);
// Whether chooseTransports needs the net offers: some rank may use net.
bool needsNetOffers(const std::string& mode, const std::vector<std::string>& hostIds);
// chooseTransports for ctx.rank under COLL_TRANSPORT=`mode`, with the ranks' network
// backend offers, which it first exchanges over ctx.bootstrap where some rank may use one
// (every rank decides alike whether that exchange happens; collective: every rank calls
// it). hostnames: per rank, for messages.
TransportChoice planTransports(const TransportContext& ctx, const std::string& mode,
                               const std::vector<std::string>& hostnames);

}  // namespace coll
