// The bootstrap protocol spoken after the handshake: length-prefixed frames between each
// rank and the rendezvous root, plus bounds-checked (de)serialisation helpers.
//
//   frame = type u32 | payload length u64 | payload          (little-endian)
//
// rank -> root : Contribute (kind u32 | blob), Abort (reason), Goodbye
// root -> rank : Welcome (peer table), Result (blobs in rank order), Failure (rank u32 |
//                text), Error (collResult_t u32 | text: this round or the join failed),
//                Waiting (text: the ranks that have not joined yet, while the job forms)
// Every length is checked against a per-type bound before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "base/socket.hpp"

namespace coll::bs {

enum class MsgType : uint32_t {
  Welcome = 1, Contribute = 2, Result = 3, Failure = 4, Error = 5, Abort = 6, Goodbye = 7,
  Waiting = 8
};
enum class RoundKind : uint32_t { AllGather = 1, Barrier = 2 };

constexpr size_t kFrameHeader = 12;
// Largest contribution to one bootstrap all-gather: the bootstrap carries addresses and
// topology summaries, never user data.
constexpr size_t kMaxBlob = size_t(16) << 20;
constexpr size_t kMaxText = 4096;
// Longest host id or hostname carried in a hello (two of them always fit kMaxHello).
constexpr size_t kMaxName = 1024;
// Largest job the root accepts (bounds the peer table and the result of a round).
constexpr int kMaxRanks = 1 << 16;

// Largest payload a frame of `type` may carry for a job of `nranks` ranks.
size_t maxPayload(MsgType type, int nranks);
bool knownType(uint32_t t);

// Appends little-endian fields.
class Writer {
 public:
  void u32(uint32_t v);
  void u64(uint64_t v);
  void str(const std::string& s);  // u32 length + bytes
  void bytes(const void* p, size_t n);
  std::vector<uint8_t>& data() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

// Reads fields, throwing collRemoteError naming `what` when the data runs short.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const char* what) : p_(p), n_(n), what_(what) {}
  uint32_t u32();
  uint64_t u64();
  std::string str(size_t maxLen);
  const uint8_t* bytes(size_t n);
  size_t left() const { return n_ - off_; }

 private:
  void need(size_t n);
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
  const char* what_;
};

std::vector<uint8_t> makeFrame(MsgType type, const void* payload, size_t n);

// Incremental reader of one frame at a time from a non-blocking socket. Reads exactly
// the bytes of the current frame, so it never consumes the next one.
class FrameReader {
 public:
  enum class Status { Complete, Again, Closed, Bad };
  // nranks bounds the payload; 0 means "not known yet" (only small frames allowed).
  Status read(int fd, int nranks);
  MsgType type() const { return type_; }
  std::vector<uint8_t>& payload() { return payload_; }
  const std::string& why() const { return why_; }
  // Call after consuming a Complete frame.
  void reset();

 private:
  uint8_t hdr_[kFrameHeader] = {};
  size_t hdrGot_ = 0;
  bool haveHeader_ = false;
  MsgType type_ = MsgType::Goodbye;
  std::vector<uint8_t> payload_;
  size_t got_ = 0;
  std::string why_;
};

// Outgoing frames of a non-blocking socket; a frame sent to many ranks is shared.
class OutQueue {
 public:
  void push(std::shared_ptr<const std::vector<uint8_t>> frame);
  bool empty() const { return q_.empty(); }
  // Sends what the socket takes. Returns false (and sets *why) when the peer is gone.
  bool flush(int fd, std::string* why);

 private:
  std::deque<std::shared_ptr<const std::vector<uint8_t>>> q_;
  size_t off_ = 0;
};

// Hello a rank sends in the handshake, and the peer table of the Welcome.
struct RankHello {
  int rank = -1;
  int nranks = 0;
  PeerInfo info;
};
std::vector<uint8_t> encodeHello(const RankHello& h);
RankHello decodeHello(const std::vector<uint8_t>& data);  // throws collRemoteError
std::vector<uint8_t> encodePeers(const std::vector<PeerInfo>& peers);
std::vector<PeerInfo> decodePeers(const uint8_t* p, size_t n, int nranks);

// "rank 3 (host nodeA, pid 1234)"
std::string describeRank(int rank, const PeerInfo& info);

}  // namespace coll::bs
