#include "transport/shm/shm_link.hpp"

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/types.hpp"

namespace coll::shm {

ShmLink::ShmLink(Segment seg, int side, const LinkParams& p)
    : seg_(std::move(seg)),
      side_(side),
      p_(p),
      me_(seg_.side(side)),
      peerCtl_(seg_.side(1 - side)),
      out_(seg_.chan(side)),
      in_(seg_.chan(1 - side)),
      outRing_(seg_.ring(side)),
      inRing_(seg_.ring(1 - side)),
      cap_(seg_.ringBytes()),
      mask_(seg_.ringBytes() - 1),
      outKey_(seg_.recordKey(side)),
      inKey_(seg_.recordKey(1 - side)),
      adaptive_(p.adaptiveCopy && !p.sameProcess),
      chooser_(p.copyProbeNs, /*withStream=*/true, /*withSingle=*/p.singleCopySend),
      regions_(p.peerPid),
      lastSlowCheck_(std::chrono::steady_clock::now()) {
  // Stream sizes must stay multiples of a line so that a header line never wraps.
  p_.stageChunk = roundUpLine(p_.stageChunk ? p_.stageChunk : kLine);
  if (p_.stageChunk > cap_ / 2) p_.stageChunk = cap_ / 2;
  if (p_.copyChunk == 0) p_.copyChunk = kProgressBudget;
  seenStatus_ = kSideActive;
}

ShmLink::~ShmLink() {
  using M = CopyModeChooser;
  if (adaptive_ && (chosen_[M::kStaged] || chosen_[M::kSingle] || chosen_[M::kStream] || reductionStaged_))
    COLL_TRACE("shm: rank %d -> rank %d: %llu large messages staged, %llu streamed, %llu single-copy "
               "(last rates %.2f / %.2f / %.2f GB/s); %llu more staged for a reducing receiver",
               p_.rank, p_.peer, static_cast<unsigned long long>(chosen_[M::kStaged]),
               static_cast<unsigned long long>(chosen_[M::kStream]),
               static_cast<unsigned long long>(chosen_[M::kSingle]), chooser_.rate(M::kStaged),
               chooser_.rate(M::kStream), chooser_.rate(M::kSingle),
               static_cast<unsigned long long>(reductionStaged_));
  // Release: everything we wrote into the rings before closing is visible to a peer that
  // reads kSideClosed with acquire, so it can still drain what we sent.
  if (failMsg_.empty()) shared(me_->status).store(kSideClosed, std::memory_order_release);
  wakePeer();
}

void ShmLink::postSend(Xfer* x) {
  COLL_CHECK_ARG(x != nullptr, "shm postSend to rank ", p_.peer, ": xfer is null");
  COLL_CHECK_ARG(x->buf != nullptr || x->bytes == 0, "shm postSend to rank ", p_.peer,
                 ": buf is null for ", x->bytes, " bytes");
  throwIfFailed();
  if (!pending()) untimeStaged();
  x->done = 0;
  x->complete = false;
  x->postedNs = adaptive_ && x->bytes >= p_.singleCopyMin && x->bytes > 0 ? nowNs() : 0;
  sendQ_.push(x);
  // Write it into the ring now (when nothing is queued ahead of it): the peer sees a small
  // message without waiting for our next progress() call.
  if (sendQ_.size() == 1) pumpSends();
}

bool ShmLink::reducesOnReceive(const void* with, size_t bytes) const {
  // Read in place (a thread's memory, mapped collMemAlloc memory), or staged through the
  // ring: always where we may not read the peer, usually where the way is measured. Only a
  // link whose large messages all go through the kernel (COLL_SHM_CMA=1, or every link
  // while the host is oversubscribed) keeps the caller's staged reduction.
  return p_.sameProcess || !p_.singleCopyRecv || adaptive_ || SharedAllocations::instance().find(with, bytes).valid();
}

void ShmLink::postRecv(Xfer* x) {
  COLL_CHECK_ARG(x != nullptr, "shm postRecv from rank ", p_.peer, ": xfer is null");
  COLL_CHECK_ARG(x->buf != nullptr || x->bytes == 0, "shm postRecv from rank ", p_.peer,
                 ": buf is null for ", x->bytes, " bytes");
  if (x->hints.with) {
    const size_t es = typeSize(x->hints.dtype);
    COLL_CHECK_ARG(es > 0 && x->bytes % es == 0, "shm postRecv from rank ", p_.peer, ": a reducing receive of ",
                   x->bytes, " bytes is not a whole number of ", es, "-byte elements");
  }
  throwIfFailed();
  if (!pending()) untimeStaged();
  x->done = 0;
  x->complete = false;
  recvQ_.push(x);
}

bool ShmLink::progress() {
  throwIfFailed();
  bool moved = pumpSends();
  moved |= pumpRecvs();
  if (moved) {
    idleCalls_ = 0;
  } else {
    idle();
  }
  return moved;
}

void ShmLink::throwIfFailed() const {
  if (!failMsg_.empty()) throw Error(failCode_, failMsg_);
}

void ShmLink::fail(collResult_t code, const std::string& msg) {
  if (failMsg_.empty()) {
    failCode_ = code;
    failMsg_ = strCat("shm link rank ", p_.rank, " <-> rank ", p_.peer, ": ", msg);
    // Tell the peer, so that it fails too instead of waiting for us until its timeout.
    shared(me_->status).store(kSideFailed, std::memory_order_release);
    wakePeer();
  }
  throw Error(failCode_, failMsg_);
}

}  // namespace coll::shm
