#include "transport/shm/copy_mode.hpp"

#include <algorithm>

namespace coll::shm {
namespace {

// How much of the running sums of the mode in use each new sample replaces: a real change
// shows within a few deliveries, and one slow message (a receiver that posted late) does
// not flip the choice on its own. The estimate is a ratio of sums, not an average of
// rates: deliveries are observed when the sender polls, so one sample's time may be
// short by what the previous one's was long, and their sum is what is right.
constexpr double kKeep = 0.75;
// A sample counts for at most this many times the time the estimate expects for its
// bytes: one very late delivery weighs like a few slow ones, not like a spell.
constexpr double kMaxSlowdown = 4;
// The mode in use is left between trials only when its rate falls this far below the
// other's: noise in a few deliveries is not a reason to change.
constexpr double kLeaveBelow = 0.9;
// After leaving a mode that way, it is tried again after this fraction of the probe
// interval: a dip that passed costs little, a spell is confirmed and the full interval
// applies again.
constexpr uint64_t kRetryDivisor = 8;

// The first boundary of the shared clock's multiples of `every` after `now`.
uint64_t nextBoundary(uint64_t now, uint64_t every) { return (now / every + 1) * every; }

}  // namespace

CopyModeChooser::CopyModeChooser(uint64_t probeEveryNs, bool withStream, bool withSingle)
    : probeEvery_(probeEveryNs > 0 ? probeEveryNs : 1) {
  allowed_[kStream] = withStream;
  allowed_[kSingle] = withSingle;
  if (!withSingle) current_ = lastDelivered_ = kStaged;
}

int CopyModeChooser::trialCandidate() const {
  if (retry_ >= 0 && retry_ != current_) return retry_;
  int best = -1;
  for (int m = 0; m < kModes; ++m) {
    if (m == current_ || !allowed(m)) continue;
    if (best < 0 || (!measured_[m] && measured_[best]) ||
        (measured_[m] == measured_[best] && measuredAt_[m] < measuredAt_[best]))
      best = m;
  }
  return best;
}

CopyModeChooser::Mode CopyModeChooser::pick(uint64_t nowNs) {
  if (!trial_) {
    if (!measured_[current_] || nowNs < nextTrialNs_) return current_;
    const int t = trialCandidate();
    if (t < 0) return current_;  // nothing else to try
    trial_ = true;
    trialMode_ = static_cast<Mode>(t);
    retry_ = -1;
    nextTrialNs_ = nextBoundary(nowNs, probeEvery_);
    trialPicked_ = trialDelivered_ = backDelivered_ = 0;
    trialBytes_ = trialNs_ = backBytes_ = backNs_ = 0;
  }
  if (trialPicked_ >= kTrialMessages) return current_;  // waiting for the trial's deliveries
  ++trialPicked_;
  return trialMode_;
}

void CopyModeChooser::delivered(Mode m, int messages, uint64_t bytes, uint64_t busyNs, uint64_t nowNs) {
  const bool timed = m == lastDelivered_ && busyNs > 0 && bytes > 0;
  lastDelivered_ = m;
  if (trial_ && m == trialMode_) {
    trialDelivered_ += messages;
    if (timed) {
      trialBytes_ += bytes;
      trialNs_ += busyNs;
    }
    return;
  }
  // Deliveries come in the order of the picks: once the trial's are all in, the mode in
  // use's are those picked after them.
  const bool back = trial_ && m == current_ && trialPicked_ >= kTrialMessages && trialDelivered_ >= trialPicked_;
  if (back) {
    backDelivered_ += messages;
    if (timed) {
      backBytes_ += bytes;
      backNs_ += busyNs;
    }
    if (backDelivered_ >= kTrialMessages) endTrial(nowNs);
  }
  if (!timed) return;
  // A stale estimate says nothing about now: the new sample replaces it.
  const bool fresh = measured_[m] && nowNs - measuredAt_[m] < probeEvery_;
  const double keep = fresh ? kKeep : 0;
  double ns = static_cast<double>(busyNs);
  if (fresh && rate_[m] > 0) ns = std::min(ns, kMaxSlowdown * static_cast<double>(bytes) / rate_[m]);
  sumBytes_[m] = keep * sumBytes_[m] + static_cast<double>(bytes);
  sumNs_[m] = keep * sumNs_[m] + ns;
  rate_[m] = sumBytes_[m] / sumNs_[m];
  measured_[m] = true;
  measuredAt_[m] = nowNs;
  // The mode in use got clearly slower than another was at its last trial: go over to the
  // fastest such at once (if that figure is out of date, its own deliveries soon say so,
  // or the early trial of the mode just left).
  if (m != current_ || trial_) return;
  int best = -1;
  for (int o = 0; o < kModes; ++o) {
    const bool ahead = o != m && allowed(o) && measured_[o] && rate_[m] < kLeaveBelow * rate_[o];
    if (ahead && (best < 0 || rate_[o] > rate_[best])) best = o;
  }
  if (best < 0) return;
  current_ = static_cast<Mode>(best);
  retry_ = m;
  nextTrialNs_ = std::min(nextTrialNs_, nextBoundary(nowNs, std::max<uint64_t>(1, probeEvery_ / kRetryDivisor)));
}

void CopyModeChooser::endTrial(uint64_t nowNs) {
  trial_ = false;
  const Mode o = trialMode_;
  // A trial that could not be timed counts as slow until the next one.
  sumBytes_[o] = static_cast<double>(trialBytes_);
  sumNs_[o] = static_cast<double>(trialNs_);
  rate_[o] = trialNs_ > 0 ? sumBytes_[o] / sumNs_[o] : 0;
  measured_[o] = true;
  measuredAt_[o] = nowNs;
  const double yardstick = backNs_ > 0 ? static_cast<double>(backBytes_) / static_cast<double>(backNs_) : rate_[current_];
  if (rate_[o] > yardstick) current_ = o;
  // A new link tries every mode once before it waits for the interval.
  for (int m = 0; m < kModes; ++m)
    if (allowed(m) && !measured_[m]) nextTrialNs_ = 0;
}

}  // namespace coll::shm
