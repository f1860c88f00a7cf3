// Receiver half of the shm link: matching records to posted receives (FIFO), copying
// payloads out of the ring, and single-copy reads straight out of the sender's buffer.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "transport/shm/shm_link.hpp"

namespace coll::shm {

bool ShmLink::pumpRecvs() {
  bool moved = false;
  size_t budget = kProgressBudget;
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
      // that other links of the caller wait behind.
      n = readSingle(x);
      budget = 0;
    }
    if (n == 0) break;
    budget -= std::min(budget, n);
    moved = true;
  }
  publishTail();
  return moved;
}

// Reads the next record's header line and matches it to the front receive.
bool ShmLink::startRecord(Xfer* x) {
  if (available(kLine) < kLine) return false;
  const uint8_t* line = inRing_ + (tail_ & mask_);
  Record r;
  std::memcpy(&r, line, sizeof r);  // one snapshot, checked before any use
  checkRecord(r, x);
  ++recvSeq_;
  if (r.tag == kTagSingle) {
    raddr_ = r.addr;
    roff_ = 0;
    rmode_ = RecvMode::Single;
    tail_ += kLine;
  } else if (r.bytes <= kInlineMax) {
    if (r.bytes) std::memcpy(x->buf, line + kInlineOffset, r.bytes);
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

void ShmLink::checkRecord(const Record& r, const Xfer* x) {
  uint32_t seq = static_cast<uint32_t>(recvSeq_);
  if ((r.tag != kTagData && r.tag != kTagSingle) || r.seq != seq)
    fail(collRemoteError, strCat("corrupt record in the shm ring at offset ", tail_, " (tag 0x",
                                 std::hex, r.tag, std::dec, ", seq ", r.seq, "; expected seq ",
                                 seq, ")"));
  if (r.tag == kTagSingle && !p_.singleCopyRecv)
    fail(collRemoteError, "peer sent a single-copy record but single-copy was not negotiated");
  if (r.bytes != x->bytes)
    fail(collRemoteError, strCat("message size mismatch: rank ", p_.peer, " sent ", r.bytes,
                                 " bytes but rank ", p_.rank, " posted a receive of ", x->bytes,
                                 " bytes (message #", recvSeq_, " in this direction)"));
  if (r.tag == kTagSingle && r.bytes && (r.addr == 0 || r.addr + r.bytes < r.addr))
    fail(collRemoteError, strCat("peer published a bad buffer (address 0x", std::hex, r.addr,
                                 std::dec, ", ", r.bytes, " bytes)"));
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
  uint8_t* dst = static_cast<uint8_t*>(x->buf) + roff_;
  std::memcpy(dst, inRing_ + idx, first);
  if (n > first) std::memcpy(dst + first, inRing_, n - first);
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

// One step of a single-copy receive: up to copyChunk bytes from the sender's buffer.
size_t ShmLink::readSingle(Xfer* x) {
  // A peer that closed may have freed the buffer it advertised; do not touch it.
  if (shared(peerCtl_->status).load(std::memory_order_acquire) != kSideActive) checkPeerStatus();
  size_t n = std::min(p_.copyChunk, x->bytes - roff_);
  uint8_t* dst = static_cast<uint8_t*>(x->buf) + roff_;
  uint64_t src = raddr_ + roff_;
  if (p_.sameProcess) {
    // A thread of this process: the address is valid here as is (the brief trusts our own
    // process; a hostile peer needs a separate process, which goes through the kernel).
    std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  } else {
    iovec local{dst, n};
    iovec remote{reinterpret_cast<void*>(src), n};
    ssize_t got = process_vm_readv(p_.peerPid, &local, 1, &remote, 1, 0);
    if (got <= 0) {
      int err = got < 0 ? errno : EFAULT;
      if (err == ESRCH) slowChecks(true);  // names the dead peer when that is the cause
      fail(err == EFAULT ? collRemoteError : collSystemError,
           strCat("single-copy read of ", n, " bytes at 0x", std::hex, src, std::dec,
                  " from pid ", p_.peerPid, " failed: ", sysErrorText(err)));
    }
    n = static_cast<size_t>(got);
  }
  roff_ += n;
  x->done = roff_;
  if (roff_ == x->bytes) {
    recvQ_.pop();
    rmode_ = RecvMode::Idle;
    ++acks_;
    // Release: our reads of the sender's buffer are complete before it sees the ack and
    // completes (and possibly reuses) the send. Pairs with the acquire in collectAcks.
    shared(in_->acks).store(acks_, std::memory_order_release);
    wakePeer();
    x->complete = true;
  }
  return n;
}

// Bytes of the inbound ring ready to read, re-reading the sender's head only when the
// cached value does not cover `want`.
size_t ShmLink::available(size_t want) {
  size_t ready = headSeen_ - tail_;
  if (ready >= want) return ready;
  // Acquire: pairs with the sender's release of head, so the record bytes below head are
  // visible before we read them.
  uint64_t h = shared(in_->head).load(std::memory_order_acquire);
  if (h < headSeen_ || h - tail_ > cap_ || (h & (kLine - 1)))
    fail(collRemoteError, strCat("peer wrote a corrupt ring head ", h, " (previous ", headSeen_,
                                 ", tail ", tail_, ", ring ", cap_, " bytes)"));
  headSeen_ = h;
  return headSeen_ - tail_;
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
