// Receiver half of the shm link: matching records to posted receives (FIFO), copying
// payloads out of the ring, and single-copy reads straight out of the sender's buffer.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"
#include "transport/shm/shm_link.hpp"

namespace coll::shm {

bool ShmLink::pumpRecvs() {
  bool moved = false;
  size_t budget = kProgressBudget;
  bool copiedSingle = false;
  while (!recvQ_.empty() && budget > 0) {
    Xfer* x = recvQ_.front();
    if (rmode_ == RecvMode::Idle) {
      if (!startRecord(x)) break;
      moved = true;
      continue;
    }
    size_t n;
    if (rmode_ == RecvMode::Stream) {
      n = streamIn(x, budget);
    } else {
      // One single-copy step per call: a copy of copyChunk bytes is the unit of latency
      // that other links of the caller wait behind. A finished record lets the loop go
      // on to the next one's header, so that a push record is offered to the sender at
      // once instead of one progress call (one piece of our own pushes) later, but not
      // into its body: the caller may have a send to post that the peer waits for and
      // that depends on the receive just finished (a ring's next step). Copying the next
      // body first serialised the two ranks of a ring whose blocks are one chunk each:
      // a rank read the peer's all-gather piece before posting its own, and the peer
      // waited that long (2 ranks, 1 MiB in place with fused reduction: 114 us, 80 us
      // with this stop; 16 MiB, collMemAlloc buffers: 1.60 against 1.35 ms).
      if (copiedSingle) break;
      n = readSingle(x);
      copiedSingle = true;
      if (rmode_ != RecvMode::Idle) budget = 0;
    }
    if (n == 0) break;
    budget -= std::min(budget, n);
    moved = true;
  }
  publishTail();
  return moved;
}

// Reads the next record's header line and matches it to the front receive.
bool ShmLink::startRecord(Xfer* x, bool headCheck) {
  uint8_t* line = inRing_ + (tail_ & mask_);
  const uint32_t seq = static_cast<uint32_t>(recvSeq_);
  // Acquire: pairs with the sender's sealing store, after which the rest of the line
  // (and a whole record's payload) is in place.
  uint64_t w = shared(*reinterpret_cast<uint64_t*>(line)).load(std::memory_order_acquire);
  auto sealedFor = [&](uint64_t word) {
    const uint64_t d = word ^ inKey_;
    return static_cast<uint32_t>(d >> 32) == seq && knownTag(static_cast<uint32_t>(d));
  };
  if (!sealedFor(w)) {
    // Not sealed for us: nothing there yet, unless the head counter says otherwise, in
    // which case the line is corrupt and checkRecord says how. The counter is read only
    // by the idle checks (idle()): polling its line too while waiting would pull
    // it away from the sender, which stores it after every record.
    if (!headCheck || available(kLine) < kLine) return false;
    w = shared(*reinterpret_cast<uint64_t*>(line)).load(std::memory_order_relaxed);
  }
  Record r;
  std::memcpy(&r, line, sizeof r);  // one snapshot, checked before any use
  const uint64_t d = w ^ inKey_;
  r.tag = static_cast<uint32_t>(d);
  r.seq = static_cast<uint32_t>(d >> 32);
  checkRecord(r, x);
  ++recvSeq_;
  if (adaptive_ && r.bytes >= p_.singleCopyMin && r.bytes > 0) {
    peerMode_ = r.tag == kTagSingle || r.tag == kTagPush ? CopyModeChooser::kSingle
                : r.tag == kTagStream                    ? CopyModeChooser::kStream
                                                         : CopyModeChooser::kStaged;
    peerModeNs_ = nowNs();
    if (resync_ && peerArrivedNs_ == 0 && r.bytes >= kArrivalTimedMin) peerArrivedNs_ = peerModeNs_;
  }
  if (singleCopyTag(r.tag)) {
    raddr_ = r.addr;
    rregion_ = r.region;
    roff_ = 0;
    rmode_ = RecvMode::Single;
    tail_ += kLine;
    coop_ = false;
    pushOnly_ = r.tag == kTagPush;  // never into a receive that reduces (checkRecord)
    if (pushOnly_ || (!x->hints.with && x->hints.assist && p_.coopMin > 0 && r.bytes >= p_.coopMin && (p_.singleCopySend || p_.sameProcess)))
      offerCoop(x, r.seq);
  } else if (r.tag == kTagWhole) {
    // The payload follows the header, complete (the sender wrote it before sealing), in
    // at most two pieces of whole elements.
    const RingSpans sp = wholeRecordSpans(tail_, r.bytes, cap_);
    land(x, 0, inRing_ + sp.start, sp.first);
    if (sp.second) land(x, sp.first, inRing_, sp.second);
    tail_ += sp.advance;
    recvQ_.pop();
    x->done = x->bytes;
    x->complete = true;
  } else if (r.bytes <= kInlineMax) {
    if (r.bytes) land(x, 0, line + kInlineOffset, r.bytes);
    tail_ += kLine;
    recvQ_.pop();
    x->done = x->bytes;
    x->complete = true;
  } else {
    roff_ = 0;
    rmode_ = RecvMode::Stream;
    tail_ += kLine;
  }
  return true;
}

uint64_t ShmLink::unclaimedCall() {
  if (!recvQ_.empty() || rmode_ != RecvMode::Idle || !failMsg_.empty()) return 0;
  const uint8_t* line = inRing_ + (tail_ & mask_);
  const uint64_t d = shared(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(line))).load(std::memory_order_acquire) ^ inKey_;
  if (static_cast<uint32_t>(d >> 32) != static_cast<uint32_t>(recvSeq_) || !knownTag(static_cast<uint32_t>(d))) return 0;
  Record r;
  std::memcpy(&r, line, sizeof r);
  return r.call;
}

// Everything the header says is checked here, once, before the receive acts on it
// (shm_record.hpp); a refused header fails the link.
void ShmLink::checkRecord(const Record& r, const Xfer* x) {
  auto expect = [&] {
    RecordExpect e;
    e.index = recvSeq_;
    e.offset = tail_;
    e.ringBytes = cap_;
    e.bytes = x->bytes;
    e.call = x->call;
    e.singleCopyRecv = p_.singleCopyRecv;
    e.peerMayWrite = p_.singleCopySend || p_.sameProcess;
    e.reduces = x->hints.with != nullptr;
    e.rank = p_.rank;
    e.peer = p_.peer;
    return e;
  };
  // The checks read the fields straight from the link; only a refusal's text needs them
  // gathered in memory.
  const RecordFault f = checkRecordHeader(r, expect());
  if (f != RecordFault::kNone) [[unlikely]]
    fail(recordFaultCode(f), recordFaultText(f, r, expect()));
}

// Copies the next piece of a streamed payload out of the ring.
size_t ShmLink::streamIn(Xfer* x, size_t budget) {
  size_t remaining = x->bytes - roff_;
  size_t want = std::min({remaining, p_.stageChunk, budget});
  size_t n = std::min<size_t>(want, available(roundUpLine(want)));
  if (n < remaining) n &= ~(kLine - 1);
  if (n == 0) return 0;
  uint64_t idx = tail_ & mask_;
  size_t first = std::min<uint64_t>(n, cap_ - idx);
  // Pieces and the ring's wrap point are whole lines, so a reducing receive's pieces are
  // whole elements.
  land(x, roff_, inRing_ + idx, first);
  if (n > first) land(x, roff_ + first, inRing_, n - first);
  tail_ += roundUpLine(n);
  roff_ += n;
  x->done = roff_;
  if (roff_ == x->bytes) {
    recvQ_.pop();
    rmode_ = RecvMode::Idle;
    x->complete = true;
  }
  // Free the space at once so the sender can refill it while we copy the next piece.
  publishTail();
  return n;
}

// Copies n bytes between our memory and the peer's: a read into `local`, or (write) a
// push of `local` into the peer. Short copies are failures: the peer's buffer is fixed.
void ShmLink::copyRemote(void* local, uint64_t remote, size_t n, bool write, const RegionRef& region) {
  if (uint8_t* mapped = p_.sameProcess ? nullptr : regions_.translate(region, remote)) {
    // The peer's collMemAlloc memory, mapped here too. A push fills the peer's output,
    // which it does not read while the collective runs: stream large pieces past the cache.
    if (!write) std::memcpy(local, mapped, n);
    else if (n >= kMirrorStreamMin) copyStreaming(mapped, local, n);
    else std::memcpy(mapped, local, n);
    mappedBytes_ += n;
    return;
  }
  if (p_.sameProcess) {
    // A thread of this process: the address is valid here as is (the brief trusts our own
    // process; a hostile peer needs a separate process, which goes through the kernel).
    if (write) std::memcpy(reinterpret_cast<void*>(remote), local, n);
    else std::memcpy(local, reinterpret_cast<const void*>(remote), n);
    return;
  }
  iovec l{local, n};
  iovec r{reinterpret_cast<void*>(remote), n};
  ssize_t got = write ? process_vm_writev(p_.peerPid, &l, 1, &r, 1, 0)
                      : process_vm_readv(p_.peerPid, &l, 1, &r, 1, 0);
  if (got == static_cast<ssize_t>(n)) return;
  int err = got < 0 ? errno : EFAULT;
  if (err == ESRCH) {
    slowChecks(true);  // names the dead peer when that is the cause
    // The kernel found no process, or one whose memory is already gone: the peer is
    // exiting, a moment before /proc shows it as a zombie.
    fail(collRemoteError, strCat("peer rank ", p_.peer, " (pid ", p_.peerPid, ") died: its memory is gone ",
                                 "(single-copy ", write ? "write" : "read", ": ", sysErrorText(err), ")"));
  }
  fail(err == EFAULT ? collRemoteError : collSystemError,
       strCat("single-copy ", write ? "write" : "read", " of ", n, " bytes at 0x", std::hex, remote,
              std::dec, write ? " to" : " from", " pid ", p_.peerPid, " failed: ",
              got >= 0 ? strCat("copied only ", got, " bytes") : sysErrorText(err)));
}

void ShmLink::land(Xfer* x, size_t off, const void* src, size_t n) {
  uint8_t* dst = static_cast<uint8_t*>(x->buf) + off;
  if (x->hints.with)
    reduceBuffers(dst, static_cast<const uint8_t*>(x->hints.with) + off, src, n / typeSize(x->hints.dtype), x->hints.dtype, x->hints.op);
  else if (x->hints.cold && n >= kColdStreamMin)
    copyStreaming(dst, src, n);
  else
    std::memcpy(dst, src, n);
}

void ShmLink::reduceRemote(Xfer* x, size_t off, size_t n) {
  const uint64_t remote = raddr_ + off;
  if (p_.sameProcess) {
    land(x, off, reinterpret_cast<const void*>(remote), n);
    return;
  }
  if (const uint8_t* mapped = regions_.translate(rregion_, remote)) {
    land(x, off, mapped, n);
    mappedBytes_ += n;
    return;
  }
  // Through the kernel, which can only copy: the whole step into a bounce buffer with one
  // system call, as an unfused receive would into its staging slot, then reduced.
  if (bounceBytes_ < n) {
    bounce_ = std::make_unique<uint8_t[]>(n);
    bounceBytes_ = n;
  }
  copyRemote(bounce_.get(), remote, n, false, RegionRef{});
  land(x, off, bounce_.get(), n);
}

// Opens the current single-copy record to the sender as well (see ChanCtl).
void ShmLink::offerCoop(Xfer* x, uint32_t seq) {
  coop_ = true;
  const RegionRef region = p_.sameProcess ? RegionRef{} : SharedAllocations::instance().find(x->buf, x->bytes);
  coopPiece_ = region.valid() ? p_.mappedPiece : p_.coopPiece;
  coopPieces_ = (x->bytes + coopPiece_ - 1) / coopPiece_;
  coopKey_ = (static_cast<uint64_t>(seq) << 32) | kCoopOpen;
  // No claim of an earlier offer is outstanding: that record completed only when all of
  // its pieces were done, and the sender's stale claims fail on the new sequence bits.
  // The sender may still be reading the previous descriptor, though (it has not seen that
  // record's ack yet): close the claim word before rewriting the descriptor, so that its
  // re-check after reading (pushCoop) sees the change, as in a seqlock.
  shared(in_->coopClaim).store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  shared(in_->coopDone).store(0, std::memory_order_relaxed);
  shared(in_->coopDst).store(reinterpret_cast<uint64_t>(x->buf), std::memory_order_relaxed);
  shared(in_->coopBytes).store(x->bytes, std::memory_order_relaxed);
  shared(in_->coopPiece).store(coopPiece_, std::memory_order_relaxed);
  storeRegion(in_->coopRegion, region);
  shared(in_->coopClaim).store(coopKey_, std::memory_order_release);
  wakePeer();
}

// A cooperative receive: claim and pull pieces until none is left, then wait until the
// sender's pieces are done too.
size_t ShmLink::readCoop(Xfer* x) {
  auto claim = shared(in_->coopClaim);
  uint64_t w = claim.load(std::memory_order_acquire);
  if ((w & ~kCoopIndexMask) != coopKey_)
    fail(collRemoteError, strCat("peer overwrote the cooperative copy's claim word (0x", std::hex, w,
                                 ", expected 0x", coopKey_, std::dec, ")"));
  const uint64_t idx = w & kCoopIndexMask;
  if (idx < coopPieces_ && !pushOnly_) {
    if (!claim.compare_exchange_strong(w, w + 1, std::memory_order_acq_rel)) return 1;  // lost a race: retry
    const size_t off = static_cast<size_t>(idx) * coopPiece_;
    const size_t n = std::min(coopPiece_, x->bytes - off);
    copyRemote(static_cast<uint8_t*>(x->buf) + off, raddr_ + off, n, false, rregion_);
    shared(in_->coopDone).fetch_add(n, std::memory_order_acq_rel);
    return n;
  }
  // Acquire: pairs with the sender's add after each push, so its bytes are in x->buf.
  const uint64_t done = shared(in_->coopDone).load(std::memory_order_acquire);
  if (done > x->bytes)
    fail(collRemoteError, strCat("peer wrote a corrupt cooperative copy count (", done, " of ", x->bytes,
                                 " bytes)"));
  if (done < x->bytes) return 0;  // the sender is still pushing its last pieces
  finishSingle(x, x->bytes);
  return 1;
}

void ShmLink::finishSingle(Xfer* x, size_t bytes) {
  x->done = bytes;
  recvQ_.pop();
  rmode_ = RecvMode::Idle;
  coop_ = false;
  pushOnly_ = false;
  ++acks_;
  // Release: our reads of the sender's buffer are complete before it sees the ack and
  // completes (and possibly reuses) the send. Pairs with the acquire in collectAcks.
  shared(in_->acks).store(acks_, std::memory_order_release);
  wakePeer();
  x->complete = true;
}

// One step of a single-copy receive: up to copyChunk bytes from the sender's buffer.
size_t ShmLink::readSingle(Xfer* x) {
  // A peer that closed may have freed the buffer it advertised; do not touch it.
  if (shared(peerCtl_->status).load(std::memory_order_acquire) != kSideActive) checkPeerStatus();
  if (coop_) return readCoop(x);
  size_t n = std::min(p_.copyChunk, x->bytes - roff_);
  if (x->hints.with) {
    const size_t es = typeSize(x->hints.dtype);
    n = std::max(n - n % es, std::min(es, x->bytes - roff_));  // whole elements per step
    reduceRemote(x, roff_, n);
  } else {
    copyRemote(static_cast<uint8_t*>(x->buf) + roff_, raddr_ + roff_, n, false, rregion_);
  }
  roff_ += n;
  x->done = roff_;
  if (roff_ == x->bytes) finishSingle(x, roff_);
  return n;
}

// Bytes of the inbound ring ready to read, re-reading the sender's head only when the
// cached value does not cover `want`. The head may lag behind our tail for a moment: we
// take sealed records without waiting for it.
size_t ShmLink::available(size_t want) {
  size_t ready = headSeen_ > tail_ ? headSeen_ - tail_ : 0;
  if (ready >= want) return ready;
  // Acquire: pairs with the sender's release of head, so the record bytes below head are
  // visible before we read them.
  uint64_t h = shared(in_->head).load(std::memory_order_acquire);
  if (h < headSeen_ || (h > tail_ && h - tail_ > cap_) || (h & (kLine - 1)))
    fail(collRemoteError, strCat("peer wrote a corrupt ring head ", h, " (previous ", headSeen_,
                                 ", tail ", tail_, ", ring ", cap_, " bytes)"));
  headSeen_ = h;
  return headSeen_ > tail_ ? headSeen_ - tail_ : 0;
}

void ShmLink::publishTail() {
  if (tail_ == tailPublished_) return;
  // Release: our copies out of the freed ring bytes are complete before the sender sees
  // the space and overwrites it. Pairs with the acquire in freeSpace.
  shared(in_->tail).store(tail_, std::memory_order_release);
  tailPublished_ = tail_;
  wakePeer();
}

}  // namespace coll::shm
