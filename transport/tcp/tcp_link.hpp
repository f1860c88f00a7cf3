// A TCP link to one peer: S non-blocking stream sockets carrying the pieces of ordered
// sends and receives (layout in tcp_wire.hpp).
#pragma once

#include <poll.h>
#include <sys/uio.h>

#include <deque>
#include <exception>
#include <vector>

#include "base/socket.hpp"
#include "transport/tcp/tcp_wire.hpp"
#include "transport/transport.hpp"

namespace coll::tcp {

class TcpLink : public Link {
 public:
  // `streams` are connected, authenticated, already non-blocking sockets, in stream order.
  TcpLink(int peerRank, std::vector<Socket> socks, size_t chunk);

  void postSend(Xfer* x) override;
  void postRecv(Xfer* x) override;
  bool progress() override;
  void waitActivity(int timeoutMs) override;
  bool appendPollFds(std::vector<pollfd>* fds) override;
  const char* transportName() const override { return "tcp"; }
  bool pending() const override;
  uint64_t unclaimedCall() override;

  int streams() const { return static_cast<int>(socks_.size()); }

 private:
  struct Msg {
    Xfer* x;
    uint32_t pieces;
    uint32_t left;        // pieces not yet fully moved
    bool agreed;          // receive: header checked, so the other pieces may be read
    WireHeader hdr;       // send: prebuilt; receive: filled from the wire
  };
  // One direction: messages by sequence number, oldest incomplete first.
  struct Queue {
    std::deque<Msg> msgs;
    uint64_t base = 0;  // seq of msgs.front()
    uint64_t end() const { return base + msgs.size(); }
  };
  // Where one stream is in its direction: the next piece it carries, and how many of
  // that piece's bytes (header included) have moved.
  struct Cursor {
    uint64_t seq = 0;
    uint32_t piece = 0;
    size_t off = 0;
  };

  void post(Queue& q, Xfer* x);
  Msg* current(Queue& q, Cursor& c, int s);
  size_t gather(Queue& q, Cursor c, int s, bool recv);
  void consume(Queue& q, Cursor& c, int s, size_t n, bool recv);
  void checkHeader(const Msg& m, uint64_t seq) const;
  bool sendOn(int s);
  bool recvOn(int s);
  [[noreturn]] void ioFailed(int err, const char* what) const;
  static void popComplete(Queue& q);

  int peer_;
  size_t chunk_;
  std::vector<Socket> socks_;
  Queue sendQ_, recvQ_;
  std::vector<Cursor> sendCur_, recvCur_;
  // A header that failed its check while an earlier message was still arriving on other
  // streams: that message is delivered first (it was sent before), then this is thrown.
  // The stream that carried the bad header is read no further: its layout is unknown.
  std::exception_ptr heldError_;
  uint64_t heldSeq_ = 0;
  std::vector<char> stalled_;
  // Throws the header check's error now, or holds it (see heldError_) while messages
  // before `seq` are incomplete.
  void failHeader(uint64_t seq, int s);
  std::vector<iovec> iov_;      // scratch for one syscall
  std::vector<pollfd> pfds_;
};

}  // namespace coll::tcp
