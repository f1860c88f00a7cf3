// Sender half of the shm link: writing records into the outbound ring and completing
// single-copy sends when the receiver acknowledges them.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "base/error.hpp"
#include "base/reduce.hpp"
#include "transport/shm/shm_link.hpp"

namespace coll::shm {

bool ShmLink::pumpSends() {
  bool moved = collectAcks();
  if (!stagedDue_.empty()) timeDeliveries();
  moved |= pushCoop();
  size_t budget = kProgressBudget;
  while (!sendQ_.empty() && budget > 0) {
    Xfer* x = sendQ_.front();
    if (!sendHdrDone_) {
      if (!emitHeader(x)) break;
      moved = true;
      continue;
    }
    size_t n = streamOut(x, budget);
    if (n == 0) break;
    budget -= n;
    moved = true;
  }
  publishHead();
  return moved;
}

bool ShmLink::collectAcks() {
  if (ackQ_.empty()) return false;
  // Acquire: pairs with the receiver's release after its copy out of our buffers, so
  // the buffers of acknowledged sends are no longer read once we complete them.
  uint64_t acks = shared(out_->acks).load(std::memory_order_acquire);
  if (acks == acksSeen_) return false;
  if (acks < acksSeen_ || acks - acksSeen_ > ackQ_.size())
    fail(collRemoteError, strCat("peer wrote a corrupt ack counter (", acks, " after ", acksSeen_,
                                 " with ", ackQ_.size(), " single-copy sends outstanding)"));
  int timed = 0;
  uint64_t timedBytes = 0, startNs = 0;
  for (; acksSeen_ < acks; ++acksSeen_) {
    Xfer* x = ackQ_.pop();
    const AckInfo a = acksDue_.front();
    acksDue_.pop_front();
    if (a.timed) {
      if (timed++ == 0) startNs = a.startNs;
      timedBytes += x->bytes;
    }
    x->done = x->bytes;
    x->complete = true;
  }
  if (timed) delivered(CopyModeChooser::kSingle, timed, timedBytes, startNs);
  return true;
}

// The receiver offered the oldest unacknowledged single-copy send for a cooperative copy:
// claim one piece and push it into the receiver's buffer. The receiver acknowledges the
// send only once every piece, ours included, is done. A push record's pieces are all
// ours, one per call (so that our receives, and the offers that feed the peer's pushes,
// are never more than a piece behind), each copied into the mirror right after.
bool ShmLink::pushCoop() {
  if (ackQ_.empty() || !canWritePeer()) return false;
  auto claim = shared(out_->coopClaim);
  // Acquire: pairs with the receiver's release when it opened the offer, so the
  // descriptor written before it is visible.
  uint64_t w = claim.load(std::memory_order_acquire);
  if (!(w & kCoopOpen) || static_cast<uint32_t>(w >> 32) != acksDue_.front().seq) return false;
  Xfer* x = ackQ_.front();
  const uint64_t bytes = shared(out_->coopBytes).load(std::memory_order_relaxed);
  const uint64_t piece = shared(out_->coopPiece).load(std::memory_order_relaxed);
  const uint64_t dst = shared(out_->coopDst).load(std::memory_order_relaxed);
  const RegionRef region = loadRegion(out_->coopRegion);
  // The receiver may have finished that record and opened its next offer while we read:
  // then the descriptor is (partly) the new one, and the claim word has changed (it is
  // closed before the descriptor is rewritten). Pairs with the fence in offerCoop.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (claim.load(std::memory_order_relaxed) != w) return false;
  if (bytes != x->bytes || piece < kLine || dst == 0 || dst + bytes < dst)
    fail(collRemoteError, strCat("peer offered a corrupt cooperative copy (", bytes, " bytes in pieces of ",
                                 piece, " at 0x", std::hex, dst, std::dec, " for a send of ", x->bytes,
                                 " bytes)"));
  if (region.valid() && !region.contains(dst, bytes))
    fail(collRemoteError, strCat("peer offered a buffer (0x", std::hex, dst, std::dec, ", ", bytes,
                                 " bytes) outside the shared region it named (0x", std::hex, region.base,
                                 std::dec, ", ", region.bytes, " bytes)"));
  const uint64_t pieces = (bytes + piece - 1) / piece;
  const uint64_t idx = w & kCoopIndexMask;
  if (idx >= pieces) return false;
  // The claim word still naming our record and this index is what makes the piece ours;
  // the descriptor read above cannot change while a claimed piece is outstanding.
  if (!claim.compare_exchange_strong(w, w + 1, std::memory_order_acq_rel)) return false;
  const uint64_t off = idx * piece;
  const size_t n = static_cast<size_t>(std::min(piece, bytes - off));
  copyRemote(static_cast<uint8_t*>(x->buf) + off, dst + off, n, true, region);
  // Release: the piece is in the receiver's buffer before it counts it as done.
  shared(out_->coopDone).fetch_add(n, std::memory_order_acq_rel);
  wakePeer();
  if (x->hints.mirror) copyMirror(x, off, n);  // emitHeader made it a push record
  return true;
}

void ShmLink::copyMirror(Xfer* x, size_t off, size_t n) {
  if (n == 0) return;
  uint8_t* d = static_cast<uint8_t*>(x->hints.mirror) + off;
  const uint8_t* s = static_cast<const uint8_t*>(x->buf) + off;
  if (x->hints.cold) copyStreaming(d, s, n);
  else std::memcpy(d, s, n);
}

// Writes the header line of the front send (and, when it fits, the whole message).
// Returns false when the ring has no free line.
bool ShmLink::emitHeader(Xfer* x) {
  if (freeSpace(kLine) < kLine) return false;
  const bool large = x->bytes > 0 && x->bytes >= p_.singleCopyMin;
  bool single = p_.singleCopySend && large;
  RegionRef region;
  if (single && !p_.sameProcess) region = SharedAllocations::instance().find(x->buf, x->bytes);
  // Plain process memory: the chooser says which way is faster now (the staged ones only,
  // where the kernel refuses the peer's reads). Mapped collMemAlloc memory and threads of
  // one process copy without the kernel: single-copy always wins.
  bool timed = large && adaptive_ && !region.valid();
  uint64_t startNs = 0;
  CopyModeChooser::Mode m = CopyModeChooser::kStaged;
  if (timed && x->hints.intoReduction) {
    // The receiver reduces it and we would only wait: both of us copy at once through the
    // ring (Xfer::intoReduction). Not a choice of the chooser's, so not timed either.
    timed = false;
    single = false;
    ++reductionStaged_;
  } else if (timed) {
    startNs = nowNs();
    if (followsPeer(startNs)) {
      // The peer's choice for the link, as its latest large record shows it (staged
      // where it reads us and we may not read it).
      m = peerMode_ == CopyModeChooser::kSingle && !p_.singleCopySend ? CopyModeChooser::kStaged : peerMode_;
      timed = false;
    } else {
      m = chooser_.pick(startNs);
    }
    ++chosen_[m];
    single = m == CopyModeChooser::kSingle;
  }
  const bool push = single && x->hints.mirror && canWritePeer();
  const bool inl = !single && x->bytes <= kInlineMax;
  // A payload of one stage chunk or less that fits now goes in behind the header before
  // the header is sealed: the receiver then takes the whole message at once, without
  // waiting for the head counter (for streamed pieces it must).
  const bool whole = !single && !inl && x->bytes <= p_.stageChunk &&
                     freeSpace(kLine + roundUpLine(x->bytes)) >= kLine + roundUpLine(x->bytes);
  sendStreams_ = !single && m == CopyModeChooser::kStream;
  const uint32_t tag = push ? kTagPush : single ? kTagSingle : whole ? kTagWhole : sendStreams_ ? kTagStream : kTagData;
  uint8_t* line = outRing_ + (head_ & mask_);
  Record r{tag, static_cast<uint32_t>(sendSeq_++), x->bytes, x->call,
           single ? reinterpret_cast<uint64_t>(x->buf) : 0, region};
  // Timed from its post, like the queued single-copy sends, whose headers all go out at
  // once: a staged send's header waits for the one before it to be written in, and
  // timing from there would leave out whatever else the sender did meanwhile (its own
  // receives), which the single-copy figure includes.
  if (timed && x->postedNs && x->postedNs < startNs) startNs = x->postedNs;
  if (timed && !single) stagedDue_.push_back({head_ + kLine + roundUpLine(x->bytes), x->bytes, startNs, m});
  if (whole) {
    // Header lines never wrap, and the ring's end is a line boundary, so the payload
    // is at most two pieces.
    const uint64_t idx = (head_ + kLine) & mask_;
    const size_t first = std::min<uint64_t>(x->bytes, cap_ - idx);
    const uint8_t* src = static_cast<const uint8_t*>(x->buf);
    copyIn(outRing_ + idx, src, first);
    if (x->bytes > first) copyIn(outRing_, src + first, x->bytes - first);
  }
  sealHeader(line, r, inl ? x->buf : nullptr, inl ? x->bytes : 0);
  head_ += kLine + (whole ? roundUpLine(x->bytes) : 0);
  // A push record's pieces are mirrored as they are pushed (pushCoop, which runs only
  // when we can write the peer, as push records are made); a streamed message's as they
  // enter the ring (streamOut); the rest here.
  if (x->hints.mirror && !push && (single || inl || whole)) copyMirror(x, 0, x->bytes);
  if (single) {
    sendQ_.pop();
    ackQ_.push(x);
    acksDue_.push_back({r.seq, timed, startNs});
  } else if (inl || whole) {
    sendQ_.pop();
    x->done = x->bytes;
    x->complete = true;
    // Publish at once: for small messages this is the whole latency path.
    publishHead();
  } else {
    sendHdrDone_ = true;
    sendOff_ = 0;
  }
  return true;
}

void ShmLink::sealHeader(uint8_t* line, const Record& r, const void* inl, size_t inlBytes) {
  constexpr size_t kWord = sizeof(uint64_t);
  static_assert(offsetof(Record, bytes) == kWord && offsetof(Record, call) == 2 * kWord &&
                kInlineOffset == 3 * kWord);
  if (inl) {
    std::memcpy(line + kWord, reinterpret_cast<const uint8_t*>(&r) + kWord, kInlineOffset - kWord);  // bytes, call
    if (inlBytes) std::memcpy(line + kInlineOffset, inl, inlBytes);
  } else {
    std::memcpy(line + kWord, reinterpret_cast<const uint8_t*>(&r) + kWord, sizeof r - kWord);
  }
  // Release: the rest of the line and a whole record's payload are visible no later than
  // the sealed word, which the receiver loads with acquire.
  shared(*reinterpret_cast<uint64_t*>(line)).store(sealWord(r.tag, r.seq, outKey_), std::memory_order_release);
}

// Payload bytes into the ring, the way the front send goes (staged or streamed).
void ShmLink::copyIn(uint8_t* ring, const uint8_t* src, size_t n) const {
  if (sendStreams_) copyStreaming(ring, src, n);
  else std::memcpy(ring, src, n);
}

// Copies the next piece of the front send's payload into the ring. Pieces are whole
// lines except the last, which is padded, so head_ stays line-aligned.
size_t ShmLink::streamOut(Xfer* x, size_t budget) {
  size_t remaining = x->bytes - sendOff_;
  size_t want = std::min({remaining, p_.stageChunk, budget});
  size_t space = freeSpace(roundUpLine(want));
  size_t n = std::min(want, space);
  if (n < remaining) n &= ~(kLine - 1);
  if (n == 0) return 0;
  uint64_t idx = head_ & mask_;
  size_t first = std::min<uint64_t>(n, cap_ - idx);
  const uint8_t* src = static_cast<const uint8_t*>(x->buf) + sendOff_;
  copyIn(outRing_ + idx, src, first);
  if (n > first) copyIn(outRing_, src + first, n - first);
  head_ += roundUpLine(n);
  // Publish each piece so the receiver copies it out while we write the next one (and
  // the mirror copy of this one, whose source is still in cache).
  publishHead();
  if (x->hints.mirror) copyMirror(x, sendOff_, n);
  sendOff_ += n;
  x->done = sendOff_;
  if (sendOff_ == x->bytes) {
    sendQ_.pop();
    sendHdrDone_ = false;
    x->complete = true;
  }
  return n;
}

// Free bytes in the outbound ring, re-reading the receiver's tail only when the cached
// value does not leave `want` bytes (the common case touches no shared line).
size_t ShmLink::freeSpace(size_t want) {
  size_t space = cap_ - (head_ - tailSeen_);
  if (space >= want) return space;
  refreshTail();
  return cap_ - (head_ - tailSeen_);
}

void ShmLink::refreshTail() {
  // Acquire: pairs with the receiver's release of its tail, so its reads of the bytes it
  // freed are done before we overwrite them.
  uint64_t t = shared(out_->tail).load(std::memory_order_acquire);
  // The receiver may be ahead of the published head (up to head_): it takes sealed
  // records as soon as it sees them.
  if (t < tailSeen_ || t > head_ || (t & (kLine - 1)))
    fail(collRemoteError, strCat("peer wrote a corrupt ring tail ", t, " (previous ", tailSeen_,
                                 ", head ", head_, ")"));
  tailSeen_ = t;
}

// Timed staged sends are delivered once the receiver's tail has passed their last byte
// (the sender finishing its copy into the ring says nothing about the receiver's speed).
void ShmLink::timeDeliveries() {
  if (tailSeen_ < stagedDue_.front().end) refreshTail();
  // Runs of one mode are reported together.
  while (!stagedDue_.empty() && stagedDue_.front().end <= tailSeen_) {
    const CopyModeChooser::Mode m = stagedDue_.front().mode;
    const uint64_t startNs = stagedDue_.front().startNs;
    int n = 0;
    uint64_t bytes = 0;
    while (!stagedDue_.empty() && stagedDue_.front().end <= tailSeen_ && stagedDue_.front().mode == m) {
      bytes += stagedDue_.front().bytes;
      stagedDue_.pop_front();
      ++n;
    }
    delivered(m, n, bytes, startNs);
  }
}

// Staged sends complete once they are in the ring, and the caller may then stop polling
// this link (its operation is done) while the receiver still copies them out: when it
// next posts to an idle link, however long after, their deliveries cannot be timed.
void ShmLink::untimeStaged() {
  resync_ = true;
  peerArrivedNs_ = 0;
  if (stagedDue_.empty()) return;
  const uint64_t now = nowNs();
  for (const StagedDue& d : stagedDue_) chooser_.delivered(d.mode, 1, 0, 0, now);
  stagedDue_.clear();
}

// Symmetric traffic (ring steps: both sides send alike) goes best when both directions
// take the same way, and the trials of one side are clean only when the other side's
// traffic changes with them: so the higher side of the pair takes the way of the lower
// side's latest large record while those keep coming, and chooses by itself otherwise
// (it alone sends, as the root of a broadcast).
bool ShmLink::followsPeer(uint64_t nowNs) const {
  return side_ == 1 && peerModeNs_ != 0 && nowNs - peerModeNs_ < p_.copyProbeNs / kFollowDivisor;
}

// The link was busy with these messages from their start, or from the previous
// delivery when they queued behind it (deliveries come in order), until now.
void ShmLink::delivered(CopyModeChooser::Mode m, int messages, uint64_t bytes, uint64_t startNs) {
  const uint64_t now = nowNs();
  uint64_t from = std::max(startNs, lastDeliveredNs_);
  // The first delivery after the link was idle waited for the peer to reach the same
  // operation (ranks arrive at different times). Where more of ours follow it and the
  // traffic goes both ways, it is timed from the peer's arrival, as its first large record
  // shows it: untimed, a call of two messages each way would be judged by its second
  // alone, though the ways differ most in the first (2 MiB all-gathers went staged at 1.3x
  // the single copy's time). A lone message is not timed at all, so a link that carries
  // one large message per call keeps the single copy (copy_mode.hpp). Nor is a delivery
  // timed during which the peer's large messages came another way (a trial before the
  // peer follows it, or the peer's own): each side's time goes to its sends and its
  // receives alike, so that would time a mixture of the two ways, not m.
  const bool mixed = peerModeNs_ > from && peerMode_ != peerAlike(m);
  if (resync_) {
    const bool more = !sendQ_.empty() || !ackQ_.empty() || !stagedDue_.empty();
    from = peerArrivedNs_ == 0 || !more ? now : std::max(from, peerArrivedNs_);
  }
  const uint64_t busy = mixed || now <= from ? 0 : now - from;
  resync_ = false;
  peerArrivedNs_ = 0;
  chooser_.delivered(m, messages, bytes, busy, now);
  lastDeliveredNs_ = now;
}

void ShmLink::publishHead() {
  if (head_ == headPublished_) return;
  // Release: the record bytes written above become visible no later than the new head,
  // which pairs with the receiver's acquire load of head.
  shared(out_->head).store(head_, std::memory_order_release);
  headPublished_ = head_;
  wakePeer();
}

}  // namespace coll::shm
