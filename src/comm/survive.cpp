// The C calls that let a job outlive some of its ranks: collCommRevoke,
// collCommGetFailedRanks, collCommShrink and collCommGrow (doc/recovery.md).
//
// Shrink: every survivor derives the same new id from the parent (its secret, an attempt
// counter and the lowest surviving rank, whose rendezvous port every rank learned when
// the parent formed); that rank hosts the rendezvous there and all survivors connect to
// it as to any new communicator. Nothing depends on rank 0 or on the parent's root.
// Grow: the same with rank 0 as the host and the new processes joining with the id that
// collCommGetGrowId gives.
#include <algorithm>
#include <cstring>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "bootstrap/protocol.hpp"
#include <atomic>
#include <string>

#include "comm/device_ops.hpp"
#include "base/export.hpp"
#include "comm/handles.hpp"
#include "comm/recovery.hpp"

using namespace coll;

namespace {

void publish(collComm_t* newcomm, std::unique_ptr<Comm> impl) {
  auto handle = std::make_unique<collComm>();
  handle->impl = std::move(impl);
#if COLL_HAVE_CUDA
  attachCuda(*handle);
#endif
  *newcomm = handle.release();
  registerHandle(*newcomm);
}

}  // namespace

extern "C" COLL_EXPORT collResult_t collCommRevoke(collComm_t comm) {
  return guarded(comm, "collCommRevoke", [&] {
    collComm& c = liveComm(comm);
    // No IssueGuard: the point is to stop an operation another thread is running.
    if (c.impl->revoked()) return;
    c.impl->revoke(strCat("the communicator was revoked by rank ", c.impl->rank(), " (collCommRevoke)"), true);
  });
}

extern "C" COLL_EXPORT collResult_t collCommGetFailedRanks(collComm_t comm, int* ranks, int capacity, int* nFailed) {
  return guarded(comm, "collCommGetFailedRanks", [&] {
    collComm& c = liveComm(comm);
    COLL_CHECK_ARG(nFailed, "nFailed is NULL");
    COLL_CHECK_ARG(capacity >= 0, "capacity = ", capacity, " is negative");
    COLL_CHECK_ARG(ranks || capacity == 0, "ranks is NULL but capacity = ", capacity);
    std::vector<int> failed = c.impl->recovery().failedRanks();
    for (int i = 0; i < capacity && i < static_cast<int>(failed.size()); ++i) ranks[i] = failed[i];
    *nFailed = static_cast<int>(failed.size());
  });
}

extern "C" COLL_EXPORT const char* collCommFailureReason(collComm_t comm, int rank) {
  CommUseScope use;
  thread_local std::string text;
  if (!comm || !isLiveHandle(comm)) return "";
  text = comm->impl->recovery().failureReason(rank);
  return text.c_str();
}

extern "C" COLL_EXPORT collResult_t collCommShrink(collComm_t comm, const int* excludeRanks, int nExclude,
                                                   collComm_t* newcomm) {
  return guarded(comm, "collCommShrink", [&] {
    collComm& c = liveComm(comm);
    IssueGuard busy(c);
    COLL_CHECK_ARG(newcomm, "newcomm is NULL");
    *newcomm = nullptr;
    Comm& parent = *c.impl;
    const int n = parent.nranks(), me = parent.rank();
    COLL_CHECK_ARG(nExclude >= 0 && nExclude < n, "nExclude = ", nExclude, " is outside [0, ", n, ")");
    COLL_CHECK_ARG(excludeRanks || nExclude == 0, "excludeRanks is NULL but nExclude = ", nExclude);
    std::set<int> excluded;
    for (int i = 0; i < nExclude; ++i) {
      const int r = excludeRanks[i];
      COLL_CHECK_ARG(r >= 0 && r < n, "excludeRanks[", i, "] = ", r, " is outside [0, ", n, ")");
      COLL_CHECK_ARG(r != me, "rank ", me, " cannot exclude itself (excludeRanks[", i, "]); a rank that leaves "
                     "does not call collCommShrink");
      COLL_CHECK_ARG(excluded.insert(r).second, "rank ", r, " appears twice in excludeRanks");
    }
    Recovery& rec = parent.recovery();
    // The excluded must be gone: a live rank left out would wait on this communicator
    // for partners that are no longer there. A process that is being killed may still
    // show as running for a moment after its sockets closed: look again for a while.
    for (int r : excluded) {
      const Deadline settle(1.0);
      while (rec.alive(r) && !settle.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (rec.alive(r))
        COLL_THROW(collInvalidArgument, "rank ", r, " is in excludeRanks but its process is alive (",
                   bs::describeRank(r, parent.peers()[r]), "); collCommShrink leaves out failed ranks only");
    }
    std::vector<int> survivors;
    for (int r = 0; r < n; ++r)
      if (!excluded.count(r)) survivors.push_back(r);
    const int host = survivors.front();
    const int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), me) - survivors.begin());
    if (host != me && !rec.alive(host))
      COLL_THROW(collRemoteError, "rank ", host, ", the lowest surviving rank, which would host the new "
                 "communicator's rendezvous, has failed too (", rec.failureReason(host),
                 "): exclude it as well (collCommGetFailedRanks)");
    // The id follows from the set left out, which every survivor passes alike (an attempt
    // counter would drift apart between ranks that failed an attempt at different points).
    uint64_t setId = 1469598103934665603ull;  // FNV-1a over the excluded ranks
    for (int r : excluded) setId = (setId ^ static_cast<uint64_t>(r)) * 1099511628211ull;
    const UniqueIdData id = rec.derivedId("shrink", setId, host);
    const int newN = static_cast<int>(survivors.size());
    if (host == me) rec.hostRendezvous(id, newN, parent.timeoutSec());
    // A survivor that dies meanwhile would leave the others waiting for it until
    // COLL_TIMEOUT: a watcher probes them and cancels the formation at once.
    std::atomic<bool> cancel{false}, done{false};
    std::string lost;
    std::thread watcher([&] {
      while (!done.load()) {
        for (int r : survivors)
          if (r != me && !rec.alive(r)) {
            lost = rec.failureReason(r);
            cancel.store(true);
            return;
          }
        if (parent.abortFlag().load()) { cancel.store(true); return; }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    std::unique_ptr<Comm> child;
    try {
      // The host may still be serving an earlier, failed attempt on its port (until it
      // notices), which drops the handshakes of this one: try again while time is left.
      const Deadline until(parent.timeoutSec());
      for (;;) {
        try {
          child = Comm::create(id, newRank, newN, &cancel, parent.givenConfig());
          break;
        } catch (const Error& e) {
          if (host == me || cancel.load() || until.expired() ||
              std::string(e.what()).find("bootstrap handshake with the root") == std::string::npos)
            throw;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    } catch (const Error& e) {
      done.store(true);
      watcher.join();
      if (!lost.empty())
        COLL_THROW(collRemoteError, "a survivor failed while the communicator shrank: ", lost,
                   "; call collCommShrink again, excluding it too (collCommGetFailedRanks)");
      throw;
    }
    done.store(true);
    watcher.join();
    // Every survivor must have left out the same ranks: compare the lists.
    std::vector<int32_t> mine(survivors.begin(), survivors.end());
    mine.resize(n, -1);
    const std::vector<uint8_t> all = child->bootstrap().allGather(mine.data(), mine.size() * sizeof(int32_t));
    for (int r = 0; r < newN; ++r)
      if (memcmp(all.data() + r * mine.size() * sizeof(int32_t), mine.data(), mine.size() * sizeof(int32_t)) != 0) {
        std::string theirs;
        const int32_t* t = reinterpret_cast<const int32_t*>(all.data() + r * mine.size() * sizeof(int32_t));
        for (int k = 0; k < n && t[k] >= 0; ++k) theirs += strCat(theirs.empty() ? "" : ",", t[k]);
        std::string ours;
        for (int s : survivors) ours += strCat(ours.empty() ? "" : ",", s);
        child->destroy();
        COLL_THROW(collInvalidUsage, "the survivors disagree on the excluded ranks: this rank keeps {", ours,
                   "} but new rank ", r, " keeps {", theirs, "}; pass the same excludeRanks on every survivor");
      }
    publish(newcomm, std::move(child));
  });
}

extern "C" COLL_EXPORT collResult_t collCommGetGrowId(collComm_t comm, collUniqueId* id) {
  return guarded(comm, "collCommGetGrowId", [&] {
    collComm& c = liveComm(comm);
    COLL_CHECK_ARG(id, "id is NULL");
    Recovery& rec = c.impl->recovery();
    *id = rec.derivedId("grow", rec.growAttempt(), 0).encode();
  });
}

extern "C" COLL_EXPORT collResult_t collCommGrow(collComm_t comm, int nNew, collComm_t* newcomm) {
  return guarded(comm, "collCommGrow", [&] {
    collComm& c = liveComm(comm);
    IssueGuard busy(c);
    COLL_CHECK_ARG(newcomm, "newcomm is NULL");
    *newcomm = nullptr;
    Comm& parent = *c.impl;
    const int n = parent.nranks();
    COLL_CHECK_ARG(nNew >= 1 && nNew <= bs::kMaxRanks - n, "nNew = ", nNew, " is outside [1, ", bs::kMaxRanks - n,
                   "] (at most ", bs::kMaxRanks, " ranks in all)");
    if (parent.revoked())
      COLL_THROW(collRevoked, "cannot grow a revoked communicator (", parent.asyncErrorText(),
                 "); shrink it first and grow the result");
    if (parent.asyncError() != collSuccess)
      COLL_THROW(collInvalidUsage, "cannot grow a communicator after an error (", parent.asyncErrorText(),
                 "); revoke and shrink it first");
    Recovery& rec = parent.recovery();
    const UniqueIdData id = rec.derivedId("grow", rec.nextGrowAttempt(), 0);
    if (parent.rank() == 0) rec.hostRendezvous(id, n + nNew, parent.timeoutSec());
    publish(newcomm, Comm::create(id, parent.rank(), n + nNew, &parent.abortFlag(), parent.givenConfig()));
  });
}
