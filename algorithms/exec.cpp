#include "algorithms/exec.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "base/error.hpp"

namespace coll {

Progress::Progress(Team& comm, const char* what)
    : comm_(comm), what_(what), call_(comm.currentCall()), backoff_(comm.hot().spinCount, comm.hot().maxSleepUs, &comm.yieldGate()),
      avoidSharedCpu_(comm.hot().avoidSharedCpu) {}

void Progress::touch(int peer) {
  if (std::find(touchedPeers_.begin(), touchedPeers_.end(), peer) != touchedPeers_.end()) return;
  touchedPeers_.push_back(peer);
  links_.push_back(&comm_.link(peer));
}

void Progress::send(int peer, const void* buf, size_t bytes, Xfer* x, void* mirror, bool coldMirror) {
  *x = Xfer{};
  x->hints.mirror = mirror;
  x->hints.cold = mirror && coldMirror;
  postSend(peer, buf, bytes, x);
}

void Progress::sendToReduction(int peer, const void* buf, size_t bytes, Xfer* x) {
  *x = Xfer{};
  x->hints.intoReduction = true;
  postSend(peer, buf, bytes, x);
}

void Progress::postSend(int peer, const void* buf, size_t bytes, Xfer* x) {
  touch(peer);
  x->buf = const_cast<void*>(buf);
  x->bytes = bytes;
  x->call = call_;
  comm_.link(peer).postSend(x);
}

bool Progress::linkCopiesMirror(int peer) const { return comm_.link(peer).copiesMirror(); }

void Progress::recv(int peer, void* buf, size_t bytes, Xfer* x, bool assist, bool cold) {
  touch(peer);
  *x = Xfer{};
  x->buf = buf;
  x->bytes = bytes;
  x->hints.assist = assist;
  x->hints.cold = cold;
  x->call = call_;
  comm_.link(peer).postRecv(x);
}

void Progress::recvReduce(int peer, void* buf, const void* with, size_t bytes, collDataType_t dt,
                          collRedOp_t op, Xfer* x) {
  touch(peer);
  *x = Xfer{};
  x->buf = buf;
  x->bytes = bytes;
  x->hints.with = with;
  x->hints.dtype = dt;
  x->hints.op = op;
  x->call = call_;
  comm_.link(peer).postRecv(x);
}

bool Progress::linkReducesOnReceive(int peer, const void* with, size_t bytes) const {
  return comm_.link(peer).reducesOnReceive(with, bytes);
}

bool Progress::poll() {
  bool moved = false;
  for (Link* l : links_) moved |= l->progress();
  return moved;
}

// A peer we wait on that last waited on this CPU is likely queued behind us on it (the
// scheduler puts a task woken from a sleep next to its waker, and a busy machine may not
// move either of two ranks off one CPU): spinning, or yielding to whatever else runs
// there, would only delay it. Checked where a spinner would yield.
// A thread that finds itself there several times in a row (across calls: a wait is often
// shorter than one check) steps off that CPU.
bool Progress::sharesCpuWithAwaitedPeer() {
  static thread_local int inARow = 0;
  constexpr int kInARowToMove = 4;
  const int cpu = currentCpu();
  if (cpu < 0) return false;
  bool shares = false;
  for (Link* l : links_) shares |= l->pending() && l->peerSharesCpu(cpu);
  if (!shares) {
    inARow = 0;
  } else if (++inARow >= kInARowToMove) {
    inARow = 0;
    stepOffCpu(cpu);
  }
  return shares;
}

void Progress::idle() {
  if (avoidSharedCpu_ && !backoff_.shouldBlock() && ((backoff_.idleCount() + 1) & (Backoff::kYieldEvery - 1)) == 0 &&
      sharesCpuWithAwaitedPeer())
    backoff_.blockNow();
  // Once spinning has not paid, sleep on the links themselves so that data arriving
  // wakes us at once (a fixed sleep would add its whole length to the latency).
  if (backoff_.shouldBlock() && !links_.empty()) {
    const int ms = std::max(1, backoff_.maxSleepUs() / 1000);
    if (links_.size() == 1) {
      links_[0]->waitActivity(ms);
      backoff_.idle();
    } else {
      pollFds_.clear();
      bool all = true;
      for (Link* l : links_) all = l->appendPollFds(&pollFds_) && all;
      if (all) {
        if (::poll(pollFds_.data(), pollFds_.size(), ms) < 0 && errno != EINTR)
          COLL_THROW(collSystemError, what_, ": poll: ", sysErrorText(errno));
      } else if (!pollFds_.empty()) {
        // Some links (shm) cannot be waited on with descriptors: sleep on the others, so
        // that their data still wakes us at once, no longer than a backoff step, then
        // look at every link again.
        const timespec ts{0, static_cast<long>(backoff_.nextSleepUs()) * 1000};
        if (::ppoll(pollFds_.data(), pollFds_.size(), &ts, nullptr) < 0 && errno != EINTR)
          COLL_THROW(collSystemError, what_, ": ppoll: ", sysErrorText(errno));
      } else {
        backoff_.idle();
      }
    }
    checkHealth();
    return;
  }
  backoff_.idle();
  // Health checks cost a clock read (and now and then a syscall): not on every spin.
  if ((backoff_.idleCount() & 255) == 0) checkHealth();
}

void Progress::checkHealth() {
  if (!deadline_) deadline_.emplace(comm_.timeoutSec());
  comm_.checkHealth(*deadline_, what_, std::span<const int>(touchedPeers_.begin(), touchedPeers_.size()));
}

void Progress::waitAll(Xfer* const* xs, size_t n) {
  waitUntil([&] {
    for (size_t i = 0; i < n; ++i)
      if (!xs[i]->complete) return false;
    return true;
  });
}

}  // namespace coll
