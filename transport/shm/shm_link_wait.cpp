// Waiting, wake-ups and failure detection of the shm link. None of this is on the path
// of a message: wakePeer costs a fence and a load unless the peer announced it sleeps.
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "base/error.hpp"
#include "transport/shm/shm_link.hpp"

namespace coll::shm {
namespace {

// How often an idle link looks at the slow signs of trouble (peer process gone, header
// overwritten). Idle progress() calls are counted first so that a spinning waiter does
// not read the clock on every call.
constexpr int kIdleCallsPerCheck = 256;
constexpr auto kSlowCheckEvery = std::chrono::milliseconds(100);

// Shared (not FUTEX_PRIVATE): the word lives in memory mapped by two processes.
void futexWait(uint32_t* word, uint32_t expected, int timeoutMs) {
  timespec ts{timeoutMs / 1000, static_cast<long>(timeoutMs % 1000) * 1000000L};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
  // EAGAIN (the word moved), EINTR and ETIMEDOUT all mean: go and look again.
}

void futexWakeAll(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, 1 << 30, nullptr, nullptr, 0); }

// True when `pid` no longer runs: gone, or a zombie that its parent has not reaped yet
// (kill() still succeeds on those, so the test alone would wait for the timeout).
bool processGone(int pid) {
  if (kill(pid, 0) < 0 && errno == ESRCH) return true;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return false;  // no /proc: trust kill()
  char buf[512];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char* close = strrchr(buf, ')');  // the command name may itself contain ')'
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

}  // namespace

void ShmLink::idle() {
  if (!pending()) return;
  checkPeerStatus();
  if (++idleCalls_ >= kIdleCallsPerCheck) {
    idleCalls_ = 0;
    // A header the head counter covers but that is not sealed: the peer wrote garbage.
    if (rmode_ == RecvMode::Idle && !recvQ_.empty()) startRecord(recvQ_.front(), true);
    slowChecks(false);
  }
}

void ShmLink::checkPeerStatus() {
  // Acquire: pairs with the peer's release when it closed, so records it wrote before
  // closing are visible to the final drain below.
  uint32_t st = shared(peerCtl_->status).load(std::memory_order_acquire);
  if (st == kSideActive) return;
  if (st == kSideFailed)
    fail(collRemoteError, strCat("peer rank ", p_.peer, " failed (its side of the link reported "
                                 "an error)"));
  if (st != kSideClosed)
    fail(collRemoteError, strCat("peer wrote a corrupt status word (", st, ")"));
  // Closed: what it wrote before closing (visible now, after the acquire) may still
  // complete our operations, so drain once more before failing: acknowledgements of our
  // single-copy sends (it acked, finished its collective and closed between our last
  // look at the ack counter and this one at its status) and records for our receives.
  // A single-copy read is not safe any more (its buffer may be gone), nor can our
  // unsent data reach it.
  bool moved = collectAcks();
  if (rmode_ != RecvMode::Single) moved |= pumpRecvs();
  if (moved) return;
  fail(collRemoteError, strCat("peer rank ", p_.peer, " closed the link with ", sendQ_.size(),
                               " sends, ", ackQ_.size(), " unacknowledged single-copy sends and ",
                               recvQ_.size(), " receives pending"));
}

// Slow signs of trouble, at most every kSlowCheckEvery unless forced.
void ShmLink::slowChecks(bool force) {
  auto now = std::chrono::steady_clock::now();
  if (!force && now - lastSlowCheck_ < kSlowCheckEvery) return;
  lastSlowCheck_ = now;
  std::string why = seg_.checkHeader();
  if (!why.empty()) fail(collRemoteError, why);
  if (peerCtl_->pid != p_.peerPid || peerCtl_->rank != p_.peer)
    fail(collRemoteError, strCat("the peer's pid/rank in the shm segment were overwritten (pid ",
                                 peerCtl_->pid, ", rank ", peerCtl_->rank, "; expected ",
                                 p_.peerPid, ", ", p_.peer, ")"));
  if (!p_.sameProcess && processGone(p_.peerPid)) {
    // A peer that sent and exited at once: what it wrote is still in the ring (our mapping
    // keeps it), so take it first, as the status check does, and report the death only
    // once nothing moves any more. (Not from inside a copy that found the peer gone: the
    // pumps may be running already, and that copy's data is lost anyway.)
    if (!force) {
      bool moved = collectAcks();
      if (rmode_ != RecvMode::Single) moved |= pumpRecvs();
      if (moved) return;
    }
    fail(collRemoteError, strCat("peer rank ", p_.peer, " (pid ", p_.peerPid, ") died"));
  }
}

// Did the peer publish anything since the last look? Updates the snapshot.
// Relaxed loads suffice: this only decides whether to sleep, and the seq_cst fence in
// waitActivity before them (paired with the one in the peer's wakePeer) is what makes
// a publication either visible here or answered by a wake-up. progress() re-reads the
// words with acquire before using anything they guard.
bool ShmLink::peerMoved() {
  uint64_t h = shared(in_->head).load(std::memory_order_relaxed);
  uint64_t t = shared(out_->tail).load(std::memory_order_relaxed);
  uint64_t a = shared(out_->acks).load(std::memory_order_relaxed);
  uint32_t s = shared(peerCtl_->status).load(std::memory_order_relaxed);
  // A cooperative copy: the receiver's offer (we send) and the sender's pieces (we receive).
  uint64_t cc = shared(out_->coopClaim).load(std::memory_order_relaxed);
  uint64_t cd = shared(in_->coopDone).load(std::memory_order_relaxed);
  bool moved = h != seenHead_ || t != seenTail_ || a != seenAcks_ || s != seenStatus_ ||
               cc != seenCoopClaim_ || cd != seenCoopDone_;
  seenCoopClaim_ = cc;
  seenCoopDone_ = cd;
  seenHead_ = h;
  seenTail_ = t;
  seenAcks_ = a;
  seenStatus_ = s;
  return moved;
}

void ShmLink::waitActivity(int timeoutMs) {
  if (!failMsg_.empty()) return;  // the next progress() reports it
  try {
    slowChecks(false);
  } catch (const Error&) {
    return;  // recorded; progress() throws it where the caller expects errors
  }
  if (timeoutMs <= 0) return;
  // Acquire: a bump of the bell by the peer orders after its publication; reading the
  // bell before announcing sleep makes a bump in between fail the futex wait at once.
  uint32_t bell = shared(me_->bell).load(std::memory_order_acquire);
  shared(me_->sleeping).store(1, std::memory_order_relaxed);
  // seq_cst fence: store(sleeping) must be ordered before the loads in peerMoved (a
  // store->load order that only a full fence gives). The peer runs the mirror image in
  // wakePeer (publish, fence, load sleeping), so at least one of us sees the other.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!peerMoved()) futexWait(&me_->bell, bell, timeoutMs);
  shared(me_->sleeping).store(0, std::memory_order_relaxed);
}

bool ShmLink::peerSharesCpu(int cpu) {
  // Relaxed: a stale value costs at most one needless sleep, or one more spin period.
  auto mine = shared(me_->cpu);
  if (mine.load(std::memory_order_relaxed) != cpu) mine.store(cpu, std::memory_order_relaxed);
  return shared(peerCtl_->cpu).load(std::memory_order_relaxed) == cpu;
}

void ShmLink::wakePeer() {
  // seq_cst fence: orders our preceding head/tail/acks/status store before the load of
  // the peer's sleeping flag (see waitActivity for the other half of the handshake).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  auto sleeping = shared(peerCtl_->sleeping);
  // The exchange makes only the first publication after the peer fell asleep pay for the
  // system call; later ones see 0 and skip it.
  if (sleeping.load(std::memory_order_relaxed) && sleeping.exchange(0, std::memory_order_acq_rel)) {
    // Release: the bell changes after our publication, so a peer woken by it sees it.
    shared(peerCtl_->bell).fetch_add(1, std::memory_order_release);
    futexWakeAll(&peerCtl_->bell);
  }
}

}  // namespace coll::shm
