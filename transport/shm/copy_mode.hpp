// How a large message between two processes crosses a shm link, chosen by measurement
// (COLL_SHM_CMA=auto).
//
//   staged       the sender copies the message into the ring, the receiver copies it
//                out, both at once: no system call, no page pinning, and the ring stays
//                in cache. Fast while the two cores exchange cache lines quickly.
//   single-copy  one side copies straight between the two buffers through the kernel
//                (process_vm_readv/writev): one copy, from memory, which keeps its speed
//                when cache lines move slowly between the cores.
//   streamed     staged, but the sender writes the ring with streaming stores, so the
//                receiver reads it from memory instead of from the sender's cache
//                (optional: only where the chooser is made with it).
//
// On the development machine the staged copy is 1.3-2x faster most of the time, and
// 2-4x slower in spells of seconds when the host's cross-core transfers slow down (the
// kernel copy keeps its speed). The streamed copy is 20-40% slower than the staged one
// normally and 3-4x faster in those spells, faster than the kernel copy too. So the
// sender measures them all: the delivery rate of each mode, in bytes per nanosecond of
// link busy time, from a message's post (or the previous delivery, when it queued behind
// one) until its delivery (the receiver's ack,
// or its tail passing the message's end in the ring). Messages go the way measured
// faster; another way is tried again on a few consecutive messages once per probe
// interval (with three ways, the one measured longest ago), and wins if it beats as many
// messages of the way in use right after it: each of the two pays for one switch, and
// trial messages ran 1.5-2.5x slower than the same way in steady use, so that a trial
// judged against the steady figure hardly ever won, whichever way a link held. Trials
// start at the first message after a boundary of the shared monotonic clock (a multiple
// of the interval), so the two ranks of a link, whose traffic is mostly symmetric, try
// another way at about the same time: a trial against the peer's traffic of another kind
// would mostly measure the mixture (and deliveries during which the peer's large
// messages came another way are not timed). Between trials the mode in use is left only when its rate falls 10% below
// another's last figure (for the fastest such); the mode left that way gets its trial
// after an eighth of the interval, in case it was a dip.
//
// A link starts single-copy and tries the staged way once the single copy has a figure,
// then (with three ways) the streamed way right after that trial.
// The first delivery after the link was idle includes the wait for the peer to arrive:
// the link times it from the peer's first large record where more messages follow it,
// and not at all where it is alone (ShmLink::delivered). So a link that carries one large
// message per call (send/recv, a 2-rank all-to-all) is never measured and keeps the
// single copy, which is never far from the best and needs only one side running.
//
// Pure logic on caller-supplied times, so it is tested without a clock.
#pragma once

#include <cstdint>

namespace coll::shm {

class CopyModeChooser {
 public:
  enum Mode : int { kStaged = 0, kSingle = 1, kStream = 2 };
  static constexpr int kModes = 3;
  // Messages in a trial of the mode not in use. The first delivery after the other
  // mode's is not counted in any figure (it pays for the switch).
  static constexpr int kTrialMessages = 8;

  // probeEveryNs: the probe interval (0: trials back to back, which tests use to mix the
  // modes). withStream: kStream is a choice too. withSingle: so is kSingle (not where the
  // kernel refuses the peer's single-copy reads); the chooser then starts with kStaged.
  explicit CopyModeChooser(uint64_t probeEveryNs, bool withStream = false, bool withSingle = true);

  // The mode of the next eligible message, sent at nowNs.
  Mode pick(uint64_t nowNs);
  // `messages` delivered messages of mode m, seen together at nowNs (in delivery order):
  // `bytes` in `busyNs` of link time. busyNs == 0 says they could not be timed.
  void delivered(Mode m, int messages, uint64_t bytes, uint64_t busyNs, uint64_t nowNs);

  Mode current() const { return current_; }
  // Bytes per nanosecond (= GB/s) last estimated for m; 0 when not measured.
  double rate(Mode m) const { return rate_[m]; }

 private:
  // The mode the next trial tries: one just left (retry_), else one never measured,
  // else the one measured longest ago; -1 when there is no other.
  int trialCandidate() const;
  void endTrial(uint64_t nowNs);

  bool allowed(int m) const { return allowed_[m]; }

  uint64_t probeEvery_;
  bool allowed_[kModes] = {true, true, false};
  Mode current_ = kSingle;
  double rate_[kModes] = {0, 0, 0};
  double sumBytes_[kModes] = {0, 0, 0}, sumNs_[kModes] = {0, 0, 0};  // decaying sums behind rate_
  uint64_t measuredAt_[kModes] = {0, 0, 0};
  bool measured_[kModes] = {false, false, false};
  Mode lastDelivered_ = kSingle;
  int retry_ = -1;  // a mode left between trials, to be tried first
  // Trials of a mode not in use: when the next may start, and the running one.
  uint64_t nextTrialNs_ = 0;
  bool trial_ = false;
  Mode trialMode_ = kStaged;
  int trialPicked_ = 0, trialDelivered_ = 0;
  uint64_t trialBytes_ = 0, trialNs_ = 0;
  // The trial's yardstick: as many messages of the mode in use right after it, which pay
  // for switching back as the trial's paid for switching over.
  int backDelivered_ = 0;
  uint64_t backBytes_ = 0, backNs_ = 0;
};

}  // namespace coll::shm
