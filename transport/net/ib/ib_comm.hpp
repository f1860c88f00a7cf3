// The data path of the InfiniBand backend: one-way connections that move ordered, tagged
// messages, small ones through registered bounce slots (eager) with credits returned by
// the receiver, large ones zero-copy by RDMA writes from the sender's buffer into the
// receiver's (protocol: ib_backend.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transport/net/ib/ib_counters.hpp"
#include "transport/net/ib/ib_mem.hpp"
#include "transport/net/ib/ib_qp.hpp"

namespace coll::net::ib {

// Tags at the start of every object handed out, so a pointer of the wrong kind (or a
// closed one that still holds the tag by chance) is refused instead of used.
enum ObjMagic : uint32_t {
  kListenMagic = 0x4c495354,
  kSendMagic = 0x53454e44,
  kRecvMagic = 0x52454356,
  kRequestMagic = 0x52455153,
  kContextMagic = 0x49424354,
};

// Requests in flight per endpoint; isend/irecv hand out NULL beyond that.
constexpr int kMaxRequests = 32;
// Regions (Cts) a sender may have to take before it polls again: one per receive in
// flight, and one per send in flight whose receive is posted late (ib_backend.cpp).
constexpr uint32_t kCtsDepth = 2 * kMaxRequests;
// RDMA writes in flight per queue pair, and the most bytes in one.
constexpr uint32_t kWriteDepth = 32;
constexpr size_t kMaxWrite = size_t(1) << 30;

class Comm;

struct Request {
  uint32_t magic = kRequestMagic;
  Comm* comm = nullptr;
  bool used = false;
  bool done = false;
  uint8_t* data = nullptr;  // send: read from; receive: written to
  size_t cap = 0;           // receive: most bytes written
  size_t size = 0;          // the message's true size (receive: from its header)
  uint64_t tag = 0;
  uint32_t seq = 0;         // the message's number on its connection
  bool zcopy = false;       // moved by RDMA writes, not through the slots
  size_t slotBytes = 0;     // send: payload bytes that go through the slots
  size_t moved = 0;         // eager payload bytes handed to slots (send) or taken from them (receive)
  bool started = false;     // header sent / received
  uint32_t piecesOut = 0;   // send: slot SENDs whose completion has not come
  // Zero-copy.
  // This side's registration on each device of the connection (QpSet::device), held
  // until done: the buffer is sent from, or written through, the ports of each.
  std::array<const RegCache::Entry*, kMaxPorts> mr{};
  bool ctsWanted = false;   // receive: a region should go to the sender
  bool ctsSent = false;     // receive: it went; send: the receiver's has arrived
  uint64_t raddr = 0;       // send: the receiver's region
  std::array<uint32_t, kMaxPorts> rkey{};  // send: the receiver's key for writes to each of its ports
  size_t wlen = 0;          // bytes written: min(the message's size, the region's)
  uint32_t stripes = 0;     // receive: writes with immediate seen; send: stripes posted whole
  uint32_t writesOut = 0;   // send: RDMA writes posted whose completion has not come
  std::array<size_t, kMaxQps> wpos{};  // send: next byte of each QP's stripe to post
};

class Comm {
 public:
  Comm(uint32_t magic, std::unique_ptr<QpSet> qp, std::shared_ptr<CounterTotals> totals, uint64_t zcopyMin);
  // Destroys the QPs (no DMA after this) before releasing the registrations of the
  // requests still in flight.
  virtual ~Comm();
  // Polls the CQ and moves what can move. Throws coll::Error (and stays failed) on a
  // failed work completion or a protocol violation.
  void progress();
  // Reports a request's state; throws when the endpoint has failed.
  bool test(Request* r, size_t* size, uint64_t* tag);
  void checkUsable() const;
  QpSet& qp() { return *qp_; }
  const ByteCounts& counts() const { return counts_; }

  uint32_t magic;

 protected:
  Request* allocRequest();
  // The request in flight (posted, not done) for message `seq`, or nullptr.
  Request* inFlight(uint32_t seq);
  virtual void onCompletion(const ibv_wc& wc) = 0;
  virtual void advance() = 0;
  // What a work request was, for messages: "a send", "an RDMA write", ...
  virtual const char* what(const ibv_wc& wc) const = 0;
  [[noreturn]] void fail(const std::string& why);
  [[noreturn]] void protocolError(const std::string& what);
  void postRecv(uint32_t q, uint64_t wrId, uint8_t* addr, uint32_t len);
  void postSend(uint32_t q, ibv_send_wr* wr);
  // The request's message has moved: out of the queue, its registration released, counted.
  void finish(Request* r);
  DeviceMemory& mem(uint32_t d) { return *devs_[d]->mem; }
  // Registers [p, p + len) on every device of the connection into r->mr; on failure
  // releases what it took and throws.
  void acquireAll(Request* r, const void* p, size_t len, bool write);
  void releaseAll(Request* r);
  bool registered(const Request* r) const { return r->mr[0] != nullptr; }
  uint32_t reqIndex(const Request* r) const { return uint32_t(r - reqs_.data()); }

  std::vector<std::shared_ptr<Device>> devs_;  // declared before qp_: outlive it
  std::unique_ptr<QpSet> qp_;
  std::shared_ptr<CounterTotals> totals_;
  uint64_t zcopyMin_;  // messages of this size or more move zero-copy; 0: none
  std::vector<Request> reqs_ = std::vector<Request>(kMaxRequests);
  std::deque<Request*> queue_;  // posted, not yet through the slots, in message order
  uint32_t nextSeq_ = 0;
  ByteCounts counts_;
  std::string error_;  // set once the endpoint has failed
};

class SendComm : public Comm {
 public:
  // Takes the QPs (already connected); credits = the receiver's slots. Posts the
  // receives that credits and regions arrive in.
  SendComm(std::unique_ptr<QpSet> qp, std::shared_ptr<CounterTotals> totals, uint64_t zcopyMin);
  // NULL when kMaxRequests are in flight.
  Request* post(const void* data, size_t size, uint64_t tag);

 private:
  void onCompletion(const ibv_wc& wc) override;
  void advance() override;
  const char* what(const ibv_wc& wc) const override;
  void advanceSlots();
  void advanceWrites(Request* r);
  bool postWrite(Request* r, uint32_t q);
  void onControl(uint32_t entry, const ibv_wc& wc);
  void onRegion(const CtsPorts& c);
  void take(Request* r, const CtsPorts& c);
  void finishIfDone(Request* r);
  uint32_t credits_;
  uint32_t head_ = 0, busy_ = 0;  // slots in use form a ring ending at head_
  std::vector<Request*> owner_;   // the message each busy slot carries
  std::vector<uint32_t> writesOut_;  // per QP
  std::map<uint32_t, CtsPorts> early_;    // regions for messages not posted yet
  std::deque<Request*> writing_;     // zero-copy sends with writes left to post
};

class RecvComm : public Comm {
 public:
  // Takes the QPs in INIT and posts a receive on every slot (allowed before RTR), so
  // the sender may send as soon as it is connected.
  RecvComm(std::unique_ptr<QpSet> qp, std::shared_ptr<CounterTotals> totals, uint64_t zcopyMin);
  // Connects to the sender, which may do less zero-copy than offered (its reply says).
  void accept(const ConnInfo& reply, const PeerPorts& where);
  Request* post(void* data, size_t size);

 private:
  struct Arrival {
    uint32_t slot, bytes;
  };
  void onCompletion(const ibv_wc& wc) override;
  void advance() override;
  const char* what(const ibv_wc& wc) const override;
  void consume(Request* r, const Arrival& a);
  void startMessage(Request* r, const uint8_t* p, uint32_t len);
  void onWritten(uint32_t seq);
  void sendRegions();
  void sendRegion(Request* r, uint32_t entry);
  void finishIfDone(Request* r);
  void repostSlot(uint32_t slot);
  void returnCredits();
  std::deque<Arrival> arrived_;  // filled slots, in message order
  uint32_t unreturned_ = 0;      // slots reposted whose credit the sender lacks
  uint32_t creditSends_ = 0;     // credit messages not yet completed
  uint32_t creditBatch_;
  std::vector<uint32_t> freeCtrl_;  // control entries free to send a region from
  // Write-with-immediate receives already posted on QPs 1.. for regions the sender
  // dropped (its message went eager): the next region uses them instead of posting.
  uint32_t surplus_ = 0;
};

// Work request ids: the kind in the top byte, an index (slot, request, control entry)
// in the middle, the queue pair in the low byte.
enum WrKind : uint64_t { kWrData = 1, kWrCredit = 2, kWrCtrl = 3, kWrWrite = 4, kWrImm = 5 };
inline uint64_t wrId(WrKind k, uint32_t index, uint32_t q = 0) {
  return (uint64_t(k) << 56) | (uint64_t(index) << 8) | q;
}
inline WrKind wrKind(uint64_t id) { return WrKind(id >> 56); }
inline uint32_t wrIndex(uint64_t id) { return uint32_t(id >> 8); }
inline uint32_t wrQp(uint64_t id) { return uint32_t(id & 0xff); }

// The sentence after a failed completion's status: the likely cause and what to do.
const char* completionHint(ibv_wc_status status);

}  // namespace coll::net::ib
