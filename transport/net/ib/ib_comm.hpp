// The data path of the InfiniBand backend: one-way connections that move ordered, tagged
// messages through registered bounce slots, with credits returned by the receiver.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

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
  size_t moved = 0;         // payload bytes handed to slots (send) or taken from them (receive)
  bool started = false;     // header sent / received
  uint32_t piecesOut = 0;   // send: pieces posted whose completion has not come
};

class Comm {
 public:
  Comm(uint32_t magic, std::unique_ptr<QpSet> qp) : magic(magic), qp_(std::move(qp)) {}
  virtual ~Comm() { magic = 0; }
  // Polls the CQ and moves what can move. Throws coll::Error (and stays failed) on a
  // failed work completion or a protocol violation.
  void progress();
  // Reports a request's state; throws when the endpoint has failed.
  bool test(Request* r, size_t* size, uint64_t* tag);
  void checkUsable() const;
  QpSet& qp() { return *qp_; }

  uint32_t magic;

 protected:
  Request* allocRequest();
  virtual void onCompletion(const ibv_wc& wc) = 0;
  virtual void advance() = 0;
  [[noreturn]] void fail(const std::string& why);
  void postRecv(uint64_t wrId, uint8_t* addr, uint32_t len);

  std::unique_ptr<QpSet> qp_;
  std::vector<Request> reqs_ = std::vector<Request>(kMaxRequests);
  std::deque<Request*> queue_;  // posted, not yet done, in message order
  std::string error_;           // set once the endpoint has failed
};

class SendComm : public Comm {
 public:
  // Takes the QP (already connected) with `credits` = the receiver's slots, and posts
  // the receives that credits arrive in.
  explicit SendComm(std::unique_ptr<QpSet> qp);
  // NULL when kMaxRequests are in flight.
  Request* post(const void* data, size_t size, uint64_t tag);

 private:
  void onCompletion(const ibv_wc& wc) override;
  void advance() override;
  uint32_t credits_;
  uint32_t head_ = 0, busy_ = 0;  // slots in use form a ring ending at head_
  std::vector<Request*> owner_;  // the message each busy slot carries
};

class RecvComm : public Comm {
 public:
  // Takes the QP in INIT and posts a receive on every slot (allowed before RTR), so
  // the sender may send as soon as it is connected.
  explicit RecvComm(std::unique_ptr<QpSet> qp);
  void accept(const ConnInfo& reply);
  Request* post(void* data, size_t size);

 private:
  struct Arrival {
    uint32_t slot, bytes;
  };
  void onCompletion(const ibv_wc& wc) override;
  void advance() override;
  void consume(Request* r, const Arrival& a);
  void returnCredits();
  std::deque<Arrival> arrived_;  // filled slots, in message order
  uint32_t unreturned_ = 0;      // slots reposted whose credit the sender lacks
  uint32_t creditSends_ = 0;     // credit messages not yet completed
  uint32_t creditBatch_;
};

// Work request ids: the kind in the top byte, the slot below.
enum WrKind : uint64_t { kWrData = 1, kWrCredit = 2 };
inline uint64_t wrId(WrKind k, uint32_t slot) { return (uint64_t(k) << 56) | slot; }

}  // namespace coll::net::ib
