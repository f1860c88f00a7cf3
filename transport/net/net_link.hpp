// A link over a network backend (plugins/net/coll_net.h): one send endpoint and one
// receive endpoint to the peer, each Xfer one backend message tagged with its call
// signature.
#pragma once

#include <deque>

#include "transport/net/net_backend.hpp"
#include "transport/transport.hpp"

namespace coll::net {

class NetLink : public Link {
 public:
  // Takes ownership of both endpoints (closed on destruction).
  NetLink(int peerRank, const Backend* backend, int maxRequests, void* sendComm, void* recvComm);
  ~NetLink() override;
  NetLink(const NetLink&) = delete;
  NetLink& operator=(const NetLink&) = delete;

  void postSend(Xfer* x) override;
  void postRecv(Xfer* x) override;
  bool progress() override;
  const char* transportName() const override { return "net"; }
  bool pending() const override { return !sendQ_.empty() || !recvQ_.empty(); }
  // Closes both endpoints, which drops their requests in flight (coll_net.h).
  void abandon() override;

 private:
  struct Msg {
    Xfer* x;
    void* request;  // null until the backend took it
    bool done;      // x is complete (and may be gone: its owner was told)
  };
  bool advance(std::deque<Msg>& q, bool recv);
  void checkArrival(const Msg& m, size_t size, uint64_t tag) const;
  [[noreturn]] void failed(collResult_t code, const char* what) const;

  int peer_;
  const Backend* b_;
  int maxRequests_;
  void* send_;
  void* recv_;
  std::deque<Msg> sendQ_, recvQ_;  // oldest first; posted ones lead
};

}  // namespace coll::net
