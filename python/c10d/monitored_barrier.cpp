// monitored_barrier for the process group.
#include "pg_internal.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace collective_c10d {

// ---- monitored barrier
//
// Rank 0 posts a receive from every other rank, which posts its check-in (a send to rank 0)
// and a receive of rank 0's release together. Rank 0 polls the receives until they are
// all in or the timeout has passed, then sends the releases. Each message is a P2PHeader
// whose tag no c10d send can carry (c10d's tags are ints) and whose byte count is the
// barrier's number on this group, so that a barrier meeting a user's send, or another
// barrier, says so. Every wait is bounded by the barrier's timeout (the library's own
// bound, the group's timeout, ends a request sooner where it is the shorter one). A
// failed barrier leaves requests in flight (rank 0's receive from a rank that never came)
// and the ranks out of step: it revokes the communicator, which ends those requests at
// once here and, within a health check, every operation of the group on the other ranks.

namespace {

constexpr int64_t kMonitoredBarrierTag = -(int64_t{1} << 40) - 0x6d62;  // "mb"

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t k = 0; k < ranks.size(); ++k) s += (k ? ", " : "") + std::to_string(ranks[k]);
  return s;
}


}  // namespace

void ProcessGroupCollective::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  TORCH_CHECK(timeout.count() > 0, "collective backend: monitored_barrier: the timeout must be positive, got ",
              opts.timeout.count(), " ms");
  // The library ends every wait after the communicator's timeout (the group's, in whole
  // seconds): a longer one could not be kept, so the barrier waits and reports that.
  const auto commBound = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_.count() / 1000.0)) * 1000);
  timeout = std::min(timeout, commBound);
  int64_t index = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = ++monitoredBarriers_;
  }
  auto work = enqueue(c10d::OpType::BARRIER, {}, [this, timeout, waitAllRanks, index](std::vector<collRequest_t>&) {
    runMonitoredBarrier(timeout, waitAllRanks, index);
  });
  GilRelease released;
  // The worker spends at most twice the timeout here (rank 0: the check-ins, then the
  // releases), after the jobs queued ahead of this one (the usual bound of a Work).
  work->wait(2 * timeout + timeout_ * 3 + std::chrono::milliseconds(10000));
}

void ProcessGroupCollective::runMonitoredBarrier(std::chrono::milliseconds timeout, bool waitAllRanks,
                                                 int64_t index) {
  if (size_ == 1) return;
  using Clock = std::chrono::steady_clock;
  const std::string where = "collective backend: monitored_barrier on rank " + std::to_string(rank_) + ": ";
  const std::string ms = std::to_string(timeout.count()) + " ms";
  const P2PHeader token{kMonitoredBarrierTag, index};
  // Indexed by peer rank: what arrived from it, its request, why it failed ("" if not).
  std::vector<P2PHeader> got(size_, P2PHeader{0, 0});
  std::vector<collRequest_t> reqs;    // rank 0: receives from each rank; others: {check-in, release}
  std::vector<std::string> errors;
  std::vector<collResult_t> codes;
  // Ends the requests still in flight (revoking the communicator) and makes the group
  // unusable here with `msg`, which it throws.
  auto fail = [&](const std::string& msg) {
    collCommRevoke(comm_);
    for (auto& r : reqs)
      if (r) collWait(&r);  // ends at once once revoked; bounded by the library's timeout anyway
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_.empty()) broken_ = msg.substr(std::strlen("collective backend: "));
    }
    throw std::runtime_error(msg);
  };
  // Polls reqs until none is in flight, `stop()` holds or the deadline passes; a request
  // that fails gets the library's reason in errors[k].
  auto poll = [&](Clock::time_point deadline, const std::function<bool()>& stop) {
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      bool inFlight = false;
      for (size_t k = 0; k < reqs.size(); ++k) {
        if (!reqs[k]) continue;
        int done = 0;
        collResult_t rc = collTest(&reqs[k], &done);
        if (rc == collInProgress) {
          inFlight = true;
          continue;
        }
        if (rc != collSuccess && errors[k].empty()) {
          errors[k] = std::string(collGetErrorString(rc)) + ": " + collGetLastError(comm_);
          codes[k] = rc;
        }
        reqs[k] = nullptr;  // done, or collTest itself failed and the request is unusable
      }
      if (!inFlight || stop() || Clock::now() >= deadline) return;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  };
  auto post = [&](collResult_t rc, const char* call, const std::string& what) {
    if (rc != collSuccess)
      fail(where + call + " " + what + " failed: " + collGetErrorString(rc) + ": " + collGetLastError(comm_));
  };
  auto mismatch = [&](int peer) -> std::string {
    const P2PHeader& h = got[peer];
    if (h.tag != kMonitoredBarrierTag)
      return "the message from rank " + std::to_string(peer) + " is a send with tag " + std::to_string(h.tag) +
             " (" + std::to_string(h.bytes) + " bytes), not monitored_barrier's: the ranks' calls differ";
    return "rank " + std::to_string(peer) + " is in monitored_barrier number " + std::to_string(h.bytes) +
           " of this group, this rank in number " + std::to_string(index);
  };
  const auto start = Clock::now();

  if (rank_ != 0) {
    reqs.assign(2, nullptr);
    errors.assign(2, "");
    codes.assign(2, collSuccess);
    post(collIsend(&token, sizeof(P2PHeader), collUint8, 0, comm_, &reqs[0]), "collIsend", "of the check-in to rank 0");
    post(collIrecv(&got[0], sizeof(P2PHeader), collUint8, 0, comm_, &reqs[1]), "collIrecv",
         "of rank 0's release");
    poll(start + timeout, [&] { return !errors[0].empty() || !errors[1].empty(); });
    if (!errors[0].empty()) fail(where + "its check-in with rank 0 failed: " + errors[0]);
    if (!errors[1].empty()) fail(where + "rank 0's release failed: " + errors[1]);
    if (reqs[1] || reqs[0])
      fail(where + "rank 0 did not release it within " + ms +
           " (rank 0 waits for every rank to arrive and names those that did not)");
    if (got[0].tag != kMonitoredBarrierTag || got[0].bytes != index) fail(where + mismatch(0));
    return;
  }

  // Rank 0: the check-ins.
  reqs.assign(size_, nullptr);
  errors.assign(size_, "");
  codes.assign(size_, collSuccess);
  for (int p = 1; p < size_; ++p)
    post(collIrecv(&got[p], sizeof(P2PHeader), collUint8, p, comm_, &reqs[p]), "collIrecv",
         "of rank " + std::to_string(p) + "'s check-in");
  // Without waitAllRanks the first failure (a request that fails) ends the wait.
  poll(start + timeout, [&] {
    if (waitAllRanks) return false;
    for (const auto& e : errors)
      if (!e.empty()) return true;
    return false;
  });
  // Every rank that did not arrive; without waitAllRanks only the first: the lowest rank
  // whose request failed, else the lowest one still missing. A revoke (another rank's
  // barrier failed first) ends every receive still waiting: it is said once, not as the
  // reason of each rank.
  std::vector<int> missing;
  std::string reasons, revoked;
  for (int p = 1; p < size_; ++p) {
    if (!errors[p].empty()) {
      missing.push_back(p);
      if (codes[p] == collRevoked) revoked = "; meanwhile " + errors[p];
      else reasons += "; rank " + std::to_string(p) + ": " + errors[p];
      if (!waitAllRanks) break;
    }
  }
  reasons += revoked;
  for (int p = 1; p < size_ && (waitAllRanks || missing.empty()); ++p) {
    if (!reqs[p]) continue;
    missing.push_back(p);
    if (!waitAllRanks) break;
  }
  std::sort(missing.begin(), missing.end());
  if (!missing.empty()) {
    fail(where + (missing.size() == 1 ? "Rank " : "Ranks ") + rankList(missing) +
         " failed to pass monitoredBarrier in " + ms + reasons);
  }
  for (int p = 1; p < size_; ++p)
    if (got[p].tag != kMonitoredBarrierTag || got[p].bytes != index) fail(where + mismatch(p));
  // The releases.
  for (int p = 1; p < size_; ++p)
    post(collIsend(&token, sizeof(P2PHeader), collUint8, p, comm_, &reqs[p]), "collIsend",
         "of the release to rank " + std::to_string(p));
  poll(Clock::now() + timeout, [] { return false; });
  std::vector<int> unreleased;
  for (int p = 1; p < size_; ++p) {
    if (!reqs[p] && errors[p].empty()) continue;
    unreleased.push_back(p);
    if (!errors[p].empty()) reasons += "; rank " + std::to_string(p) + ": " + errors[p];
  }
  if (!unreleased.empty())
    fail(where + "every rank arrived, but the release of rank" + (unreleased.size() == 1 ? " " : "s ") +
         rankList(unreleased) + " did not complete within " + ms + reasons);
}

}  // namespace collective_c10d
