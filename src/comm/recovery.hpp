// What a communicator keeps so that its ranks can survive the loss of some of them
// (doc/recovery.md): two listening sockets of its own on every rank, whose addresses all
// ranks learn when the communicator forms.
//   - The rendezvous port: where this rank hosts the rendezvous of a communicator made
//     from this one by collCommShrink (as its lowest survivor) or collCommGrow (as rank
//     0). Nothing accepts on it until then; the kernel queues early connections.
//   - The notice port: revoke notices from peers and liveness probes. It is drained
//     without blocking by the waits' health checks, so a revoke reaches a rank wherever
//     it waits, whether or not the bootstrap root is still alive.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "base/socket.hpp"

namespace coll {

class Config;

class Recovery {
 public:
  // Collective over boot (one all-gather). kernelIds: each rank's running kernel (0:
  // unknown), so that peers on this kernel are probed by their pid.
  static std::unique_ptr<Recovery> create(Bootstrap& boot, const UniqueIdData& id, const Config& cfg,
                                          std::vector<uint64_t> kernelIds);
  ~Recovery();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // Drains the notice port without blocking; true once a valid revoke notice came (then
  // *from is the rank that sent it). Called by one thread at a time (the waiter's).
  bool pollNotices(int* from);
  // Tells every peer not known dead that this communicator is revoked (at most ~1 s).
  void sendRevoke();

  // Probes every peer now (peers found dead stay dead). Thread-safe.
  void probeAll();
  // Is peer r's process alive? Probes it now unless it is known dead.
  bool alive(int r);
  std::vector<int> failedRanks();
  std::string failureReason(int r);

  // The id of the communicator that collCommShrink (tag "shrink") or collCommGrow (tag
  // "grow") forms, with its rendezvous on rank `host`'s rendezvous port. Every rank derives
  // the same id from the same (tag, attempt, host).
  UniqueIdData derivedId(const char* tag, uint64_t attempt, int host) const;
  // Starts the rendezvous of `id` on this rank's rendezvous port for nranks ranks.
  void hostRendezvous(const UniqueIdData& id, int nranks, double timeoutSec);

  uint64_t growAttempt() const { return growAttempts_; }
  uint64_t nextGrowAttempt() { return growAttempts_++; }

 private:
  Recovery() = default;
  bool probe(int r, std::string* why);
  void markDead(int r, const std::string& why);

  int rank_ = 0;
  int nranks_ = 0;
  UniqueIdData id_;
  std::vector<PeerInfo> peers_;
  std::vector<uint64_t> kernelIds_;
  Socket rendezvous_, notice_;
  std::vector<sockaddr_storage> rendezvousAddrs_, noticeAddrs_;
  uint8_t token_[32] = {};  // proves a notice comes from a rank of this communicator
  std::mutex mu_;           // dead_, why_
  std::vector<char> dead_;
  std::vector<std::string> why_;
  struct Pending {  // an accepted notice connection whose message is not all here yet
    Socket sock;
    std::vector<uint8_t> got;
    std::chrono::steady_clock::time_point since;
  };
  std::mutex pollMu_;                 // one thread drains the notice port at a time
  std::vector<Pending> pending_;      // under pollMu_
  std::atomic<int> revokedBy_{-1};    // the rank whose revoke notice came, if one did
  std::atomic<uint64_t> growAttempts_{0};
};

// A collUniqueId as 256 hex digits (for environment variables such as COLL_JOIN_ID), and
// back (collInvalidArgument when it is not one).
std::string uniqueIdToHex(const collUniqueId& id);
collUniqueId uniqueIdFromHex(const std::string& hex);

}  // namespace coll
