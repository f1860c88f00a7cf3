// A shared-memory link to one peer on the same host.
//
// Each direction is a single-producer/single-consumer byte ring (see shm_segment.hpp for
// the layout). The sender writes records aligned to cache lines:
//
//   data record    one header line; payloads up to kInlineMax bytes sit in that line,
//                  larger ones follow it, streamed in pieces as ring space frees up
//   whole record   a data record whose payload (up to one stage chunk) was written in
//                  full behind the header before the header itself
//   single-copy    one header line carrying the address and length of the sender's
//                  buffer; the receiver copies straight out of it (process_vm_readv, or
//                  memcpy when the peer is a thread of this process) and then bumps
//                  `acks`, which completes the send
//   push           the same header for a send with a mirror (Xfer::mirror): the receiver
//                  offers its buffer as for a cooperative copy but claims no piece; the
//                  sender writes every piece (process_vm_writev) and copies it into the
//                  mirror right after, while it is still in cache, so its source is read
//                  from memory once for both copies
//
// Whether a large message out of plain process memory goes single-copy or through the
// ring (written with plain or streaming stores) is chosen per message by measurement
// (LinkParams::adaptiveCopy, copy_mode.hpp).
//
// The first word of a header (tag and sequence number) is written last and sealed with
// the channel's random key (SegHeader::recordKey). A receiver that waits for a record
// watches that word instead of the ring's head counter: a small message then costs one
// cache-line transfer between the cores, not two (the counter's line, then the record's).
// Stale bytes where the next header goes (an old header, or the payload of an earlier
// record) do not decode to the expected sequence number. The head counter stays the
// authority for streamed payloads, flow control and sleeping.
//
// Records are matched FIFO to posted receives, so any number of sends and receives may
// be outstanding per direction. Every record carries a tag and a sequence number, and
// every counter the peer publishes is range-checked, so a corrupt peer turns into
// collRemoteError rather than a crash.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "collective.h"
#include "transport/shm/copy_mode.hpp"
#include "transport/shm/peer_regions.hpp"
#include "transport/shm/shm_record.hpp"
#include "transport/shm/shm_segment.hpp"
#include "transport/shm/xfer_queue.hpp"
#include "transport/transport.hpp"

namespace coll::shm {

struct LinkParams {
  int rank = 0;
  int peer = 0;
  int peerPid = 0;
  bool sameProcess = false;      // the peer is a thread of this process
  bool singleCopySend = false;   // the peer reads our large buffers in place
  bool singleCopyRecv = false;   // we read the peer's large buffers in place
  size_t singleCopyMin = 0;      // messages of at least this many bytes go single-copy
  size_t copyChunk = 1 << 20;    // bytes per single-copy step (bounds one progress call)
  size_t stageChunk = 1 << 15;   // bytes copied through the ring between publications
  size_t coopMin = 0;            // single-copy messages this large are copied by both sides (0: off)
  size_t coopPiece = 1 << 17;    // bytes per piece of a cooperative copy
  size_t mappedPiece = 1 << 19;  // ... into collMemAlloc memory the peer maps
  // COLL_SHM_CMA=auto: large messages out of plain process memory go staged, streamed or
  // single-copy (this one only when singleCopySend), whichever the link measured fastest
  // lately (copy_mode.hpp). Otherwise every message of at least singleCopyMin goes
  // single-copy when singleCopySend, staged when not.
  bool adaptiveCopy = false;
  uint64_t copyProbeNs = 250'000'000;  // the chooser's probe interval
};

// The record header (Record, the tags) and its checks are in shm_record.hpp.

// Pushes of at least this many bytes into the peer's mapped collMemAlloc memory use
// streaming stores (base/reduce.hpp): the peer does not read its output while the
// collective runs. (Mirror copies stream when the sender marks them cold, Xfer::cold.)
constexpr size_t kMirrorStreamMin = size_t{256} << 10;
// Pieces of cold receives (Xfer::cold) at least this large land with streaming stores.
constexpr size_t kColdStreamMin = size_t{4} << 10;
// The first large delivery after a link was idle is timed from the peer's arrival only
// where the peer's first large record is at least this big (ShmLink::delivered): with
// smaller ones, timing them made 512 KiB 2-rank all-reduces pick a way that took 1.2-1.4x
// as long.
constexpr size_t kArrivalTimedMin = size_t{512} << 10;
// Most bytes one progress() call copies per direction, so that one busy link cannot
// starve the caller's other links (the ring algorithms progress two at once), and so
// that a rank that both sends and receives staged pieces alternates between the two
// finely: what it copies in stays in cache until the peer copies it out. (1 MiB, a whole
// ring, made the staged 64 MiB all-gather of 2 ranks 8.0-8.6 ms against 6.0-6.2.)
constexpr size_t kProgressBudget = size_t{256} << 10;

inline uint64_t nowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
// Counters in the segment are plain integers shared with the peer; every access to them
// goes through an atomic_ref with an explicit order.
template <typename T>
std::atomic_ref<T> shared(T& v) { return std::atomic_ref<T>(v); }

// A region descriptor in the segment, field by field (the peer may read it while we
// write it; the claim word's re-check tells whether what was read is consistent).
inline void storeRegion(RegionRef& dst, const RegionRef& v) {
  shared(dst.base).store(v.base, std::memory_order_relaxed);
  shared(dst.bytes).store(v.bytes, std::memory_order_relaxed);
  shared(dst.ino).store(v.ino, std::memory_order_relaxed);
  shared(dst.fd).store(v.fd, std::memory_order_relaxed);
  shared(dst.gen).store(v.gen, std::memory_order_relaxed);
}
inline RegionRef loadRegion(RegionRef& src) {
  return RegionRef{shared(src.base).load(std::memory_order_relaxed),
                   shared(src.bytes).load(std::memory_order_relaxed),
                   shared(src.ino).load(std::memory_order_relaxed),
                   shared(src.fd).load(std::memory_order_relaxed),
                   shared(src.gen).load(std::memory_order_relaxed)};
}

class ShmLink final : public Link {
 public:
  // `side` is 0 for the lower rank of the pair. The segment is fully set up (both sides
  // attached, single-copy negotiated) before the link is made.
  ShmLink(Segment seg, int side, const LinkParams& p);
  ~ShmLink() override;
  ShmLink(const ShmLink&) = delete;
  ShmLink& operator=(const ShmLink&) = delete;

  void postSend(Xfer* x) override;
  void postRecv(Xfer* x) override;
  bool progress() override;
  void waitActivity(int timeoutMs) override;
  bool peerSharesCpu(int cpu) override;
  const char* transportName() const override { return "shm"; }
  bool pending() const override { return !sendQ_.empty() || !ackQ_.empty() || !recvQ_.empty(); }
  uint64_t unclaimedCall() override;
  bool copiesMirror() const override { return true; }
  size_t memoryBytes() const override { return seg_.bytes(); }
  // Yes between threads of one process, and for collMemAlloc memory: a peer that
  // allocates alike has its data mapped here. Yes too where the peer's large messages come
  // through the ring (single copy not negotiated, or the way chosen by measurement, which
  // mostly picks the ring): the receiver then reduces straight out of the ring instead of
  // copying into the caller's slot and reading that again (2 ranks: reduce at 2-64 MiB in
  // 0.63-0.87x the time, doc/usage.md). No where every large message goes
  // through the kernel, which can only copy, into a bounce buffer first: that gains
  // nothing over the caller's staged reduction (a reducing receive still works there; it
  // is just not asked for).
  bool reducesOnReceive(const void* with, size_t bytes) const override;

  // The mapping, for tests that play a hostile peer.
  const Segment& segment() const { return seg_; }
  int side() const { return side_; }
  bool singleCopySend() const { return p_.singleCopySend; }
  bool singleCopyRecv() const { return p_.singleCopyRecv; }
  // Bytes copied through mappings of the peer's collMemAlloc memory (peer_regions.hpp).
  uint64_t mappedBytes() const { return mappedBytes_; }
  // Messages whose way was picked by the chooser (adaptiveCopy), per way taken.
  uint64_t chosenSends(CopyModeChooser::Mode m) const { return chosen_[m]; }
  // Large sends to a reducing receiver that went through the ring without the chooser
  // (Xfer::intoReduction).
  uint64_t reductionSendsStaged() const { return reductionStaged_; }
  const CopyModeChooser* chooser() const { return adaptive_ ? &chooser_ : nullptr; }

 private:
  enum class RecvMode { Idle, Stream, Single };

  // Sender half (shm_link_send.cpp).
  bool pumpSends();
  bool collectAcks();
  bool pushCoop();
  bool emitHeader(Xfer* x);
  void copyMirror(Xfer* x, size_t off, size_t n);
  // We may write into the peer's memory (push pieces of a cooperative or push copy).
  bool canWritePeer() const { return p_.singleCopyRecv || p_.sameProcess; }
  size_t streamOut(Xfer* x, size_t budget);
  void copyIn(uint8_t* ring, const uint8_t* src, size_t n) const;
  size_t freeSpace(size_t want);
  void refreshTail();
  void publishHead();
  // The chooser's measurements: deliveries of timed messages (copy_mode.hpp).
  void timeDeliveries();
  void delivered(CopyModeChooser::Mode m, int messages, uint64_t bytes, uint64_t startNs);
  void untimeStaged();
  bool followsPeer(uint64_t nowNs) const;
  // The peer's latest large record: a lower side's choice the higher side follows for
  // this fraction of the probe interval.
  static constexpr uint64_t kFollowDivisor = 8;
  // Writes a header line: everything but the first word, then that word, sealed (release).
  void sealHeader(uint8_t* line, const Record& r, const void* inl, size_t inlBytes);

  // Receiver half (shm_link_recv.cpp).
  bool pumpRecvs();
  // headCheck: a header line that is not sealed, below the published head, is corrupt.
  bool startRecord(Xfer* x, bool headCheck = false);
  void checkRecord(const Record& r, const Xfer* x);
  size_t streamIn(Xfer* x, size_t budget);
  size_t readSingle(Xfer* x);
  void offerCoop(Xfer* x, uint32_t seq);
  size_t readCoop(Xfer* x);
  void finishSingle(Xfer* x, size_t bytes);
  // Copies one piece between our buffer and the peer's (write: we push into the peer).
  // `region`: the peer's collMemAlloc region holding `remote`, if any (then a mapping).
  void copyRemote(void* local, uint64_t remote, size_t n, bool write, const RegionRef& region);
  // Lands n incoming bytes at offset off of a receive: stored, or reduced with x->hints.with.
  static void land(Xfer* x, size_t off, const void* src, size_t n);
  // A single-copy piece of a reducing receive: combined straight out of the peer's
  // mapped (or same-process) buffer, else read through the kernel into a bounce buffer.
  void reduceRemote(Xfer* x, size_t off, size_t n);
  size_t available(size_t want);
  void publishTail();

  // Waiting, liveness and failure (shm_link_wait.cpp).
  void idle();
  void checkPeerStatus();
  void slowChecks(bool force);
  bool peerMoved();
  void wakePeer();
  void throwIfFailed() const;
  [[noreturn]] void fail(collResult_t code, const std::string& msg);

  Segment seg_;
  int side_;
  LinkParams p_;
  SideCtl* me_;
  SideCtl* peerCtl_;
  ChanCtl* out_;   // channel we send on: we write head, read tail/acks
  ChanCtl* in_;    // channel we receive on: we read head, write tail/acks
  uint8_t* outRing_;
  uint8_t* inRing_;
  uint64_t cap_;
  uint64_t mask_;
  uint64_t outKey_;  // record keys of the two channels (SegHeader::recordKey)
  uint64_t inKey_;

  // Sender state. head_ is ours alone; the copy in shared memory is only published.
  XferQueue sendQ_;      // posted, not yet fully written into the ring
  XferQueue ackQ_;       // single-copy sends waiting for the receiver's ack
  struct AckInfo {
    uint32_t seq;      // record sequence number
    bool timed;        // picked by the chooser, which wants its delivery time
    uint64_t startNs;  // when its header was written
  };
  std::deque<AckInfo> acksDue_;  // one per ackQ_ entry, same order
  uint64_t head_ = 0, headPublished_ = 0, tailSeen_ = 0, acksSeen_ = 0;
  uint64_t sendSeq_ = 0;
  size_t sendOff_ = 0;
  bool sendHdrDone_ = false;

  // Choosing between staged and single-copy (adaptiveCopy).
  bool adaptive_;
  CopyModeChooser chooser_;
  struct StagedDue {
    uint64_t end;      // ring position after its last byte: delivered once tail reaches it
    uint64_t bytes;
    uint64_t startNs;
    CopyModeChooser::Mode mode;  // kStaged or kStream
  };
  std::deque<StagedDue> stagedDue_;  // timed staged sends not yet taken out of the ring
  uint64_t lastDeliveredNs_ = 0;
  bool resync_ = true;  // the next delivery is the first since the link was idle
  uint64_t peerArrivedNs_ = 0;  // ... and when the peer's first large record since then came
  uint64_t chosen_[CopyModeChooser::kModes] = {0, 0, 0};
  uint64_t reductionStaged_ = 0;
  bool sendStreams_ = false;  // the front send's payload goes in with streaming stores
  CopyModeChooser::Mode peerMode_ = CopyModeChooser::kStaged;  // receiver: what the peer's ...
  uint64_t peerModeNs_ = 0;  // ... latest record of at least singleCopyMin bytes was, and when
  // The mode the peer's large records take when its traffic goes our way m (as
  // followsPeer maps it: staged where it may not read us single-copy).
  CopyModeChooser::Mode peerAlike(CopyModeChooser::Mode m) const {
    return m == CopyModeChooser::kSingle && !p_.singleCopyRecv ? CopyModeChooser::kStaged : m;
  }

  // Receiver state.
  XferQueue recvQ_;
  RecvMode rmode_ = RecvMode::Idle;
  uint64_t tail_ = 0, tailPublished_ = 0, headSeen_ = 0, acks_ = 0;
  uint64_t recvSeq_ = 0;
  size_t roff_ = 0;
  uint64_t raddr_ = 0;
  RegionRef rregion_;       // the current single-copy record's region
  bool coop_ = false;       // the current single-copy record was offered to the sender
  bool pushOnly_ = false;   // ... and it is a push record: the sender copies every piece
  uint64_t coopKey_ = 0;    // its claim word's sequence bits
  size_t coopPieces_ = 0;
  size_t coopPiece_ = 0;    // its bytes per piece

  PeerRegions regions_;
  uint64_t mappedBytes_ = 0;
  std::unique_ptr<uint8_t[]> bounce_;  // reducing receives read through the kernel
  size_t bounceBytes_ = 0;

  // Idle bookkeeping.
  int idleCalls_ = 0;
  std::chrono::steady_clock::time_point lastSlowCheck_;
  uint64_t seenHead_ = 0, seenTail_ = 0, seenAcks_ = 0, seenCoopClaim_ = 0, seenCoopDone_ = 0;
  uint32_t seenStatus_ = 0;
  collResult_t failCode_ = collSuccess;
  std::string failMsg_;
};

}  // namespace coll::shm
