// The communicator: one context object that owns everything a rank needs to talk to
// its peers (bootstrap, transports, links), its tunables, its error state and the
// worker thread that runs nonblocking operations.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "collective.h"
#include "base/config.hpp"
#include "base/op.hpp"
#include "base/wait.hpp"
#include "topology/job.hpp"
#include "topology/layout.hpp"
#include "topology/netdev.hpp"
#include "algorithms/team.hpp"
#include "transport/transport.hpp"
#include "tuning/select.hpp"

namespace coll {

class CostContext;
class Error;
class Recovery;
class Request;

// Sends to self and receives from self pair up in order, with equal sizes (the i-th send
// is copied into the i-th receive); throws collInvalidUsage otherwise. Operations that
// are not point-to-point are passed over.
void checkSelfPairs(int rank, const std::vector<const OpArgs*>& ops);

// COLL_TIMEOUT from cfg, in seconds; collInvalidArgument outside (0, 1e9].
double timeoutSecOf(const Config& cfg);

// The communicator: the Team its algorithms run on (algorithms/team.hpp says what each
// of these means to them), plus what only it does: creation, the order of operations, the
// worker thread, errors, abort and destroy.
class Comm final : public Team {
 public:
  // Connects to the job named by `id` as `rank` of `nranks`. Collective over the ranks.
  // `cancel` (may be null): the waits for the other ranks fail once it turns true (the
  // parent's abort flag, for collCommSplit); it is no longer read once create returns.
  // `given`: tunables the program set for this communicator (collCommInitRankConfig) in
  // place of the environment's; a split inherits them.
  static std::unique_ptr<Comm> create(const UniqueIdData& id, int rank, int nranks,
                                      const std::atomic<bool>* cancel = nullptr, const ConfigOverrides& given = {});
  // The tunables given at creation in place of the environment's.
  const ConfigOverrides& givenConfig() const { return given_; }
  ~Comm() override;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // ---- the Team
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const Config& config() const override { return cfg_; }
  double timeoutSec() const override { return timeoutSec_; }
  const HotParams& hot() const override { return hot_; }
  YieldGate& yieldGate() override { return yields_; }
  const JobTopo& topology() const override { return topo_; }
  const patterns::JobLayouts& layouts() const override;
  const CostContext& costContext() const override;
  const int* ringOrder() const override { return ringOrder_.empty() ? nullptr : ringOrder_.data(); }
  int ringPosition() const override { return ringPos_; }
  // Links to other hosts (and, at scale, within one) connect on first use.
  Link& link(int peer) override;
  uint64_t currentCall() const override { return callSig_; }
  void* scratch(size_t bytes, int slot = 0) override;
  void checkHealth(const Deadline& deadline, const char* what, std::span<const int> waitedOn = {}) override;
  // One operation: the common case, with no allocation and no queue lock when nothing
  // nonblocking is queued.
  void run(const OpArgs& op) override;

  // Set by abort(); communicators split from this one watch it while they form.
  const std::atomic<bool>& abortFlag() const { return aborted_; }
  Bootstrap& bootstrap() { return *boot_; }
  const std::vector<PeerInfo>& peers() const { return boot_->peers(); }
  // The device algorithm for a device-buffer call of `kind`, or null for host staging
  // (Selector::deviceAlgorithm).
  const Algorithm* deviceAlgorithm(OpKind kind) const { return selector_->deviceAlgorithm(kind); }
  // COLL_REPRODUCIBLE: collSum / collAvg of floating types run reproducibly (comm/repro.hpp).
  bool reproducible() const { return reproducible_; }
  uint64_t jobNonce() const { return id_.jobNonce; }
  // The transport that serves `peer` ("" for this rank), connected or not.
  const std::string& transportOf(int peer) const { return transportOf_.at(peer); }
  // Links connected so far.
  int connectedLinks() const;
  const UniqueIdData& id() const { return id_; }

  // Runs operations in issue order. Blocking calls run in the caller's thread unless
  // nonblocking work is queued ahead of them, in which case they queue too and wait.
  void run(std::vector<OpArgs> ops);
  std::shared_ptr<Request> submit(std::vector<OpArgs> ops);

  // Error state: after a failed operation the links are out of step, so every later
  // operation fails fast with the first error.
  void setAsyncError(collResult_t code, const std::string& msg);
  collResult_t asyncError() const { return asyncError_.load(); }
  std::string asyncErrorText() const;

  void abort(const std::string& why);
  void destroy();

  // Survival (comm/recovery.hpp): revoke() makes every operation here fail with
  // collRevoked from now on and, with tellPeers, tells the other ranks so.
  void revoke(const std::string& why, bool tellPeers);
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  Recovery& recovery() { return *recovery_; }

 private:
  Comm() = default;
  void connectTransports();
  void connectOnFirstUse(int peer);
  void reportMemory(const char* when) const;
  void startTuner();
  void checkTunerAgrees();
  void discoverTopology();
  LocalNet interHostInterface() const;
  void executeOps(const OpArgs* ops, size_t n);
  void executeP2P(const std::vector<const OpArgs*>& ops);
  void operationFailed(const Error& e);
  void runQueued(const std::shared_ptr<Request>& req);
  void runQueuedP2P();
  void workerLoop();

  int rank_ = 0;
  int nranks_ = 0;
  UniqueIdData id_;
  double timeoutSec_ = 300;
  bool reproducible_ = false;  // COLL_REPRODUCIBLE
  ConfigOverrides given_;
  // Requests in queue_ (changed under queueMu_): lets a blocking call skip that lock.
  std::atomic<size_t> pending_{0};
  HotParams hot_;
  YieldGate yields_;
  std::vector<int> ringOrder_;
  int ringPos_ = 0;
  Config cfg_;
  std::unique_ptr<Bootstrap> boot_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<Link>> links_;  // indexed by peer rank; null for self or not yet connected
  // Connections made on first use (COLL_LAZY_CONNECT): the factory of each peer's
  // transport (index into factories_, -1: connected at init).
  std::vector<std::unique_ptr<LinkFactory>> factories_;
  std::vector<int> factoryOf_;
  std::vector<std::string> transportOf_;
  std::vector<std::vector<uint8_t>> scratch_;
  std::unique_ptr<Selector> selector_;
  JobTopo topo_;
  LocalNet localNet_;
  std::chrono::steady_clock::time_point lastHealthCheck_{};

  std::atomic<collResult_t> asyncError_{collSuccess};
  mutable std::mutex errMu_;
  std::string asyncErrorText_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> revoked_{false};
  std::unique_ptr<Recovery> recovery_;
  const std::atomic<bool>* cancelForming_ = nullptr;  // create's `cancel`, while it runs

  // Ordering of operations: execMu_ is held while one runs; queue_ holds nonblocking
  // operations (and blocking ones that arrived behind them).
  std::mutex execMu_;
  bool closed_ = false;  // under execMu_: destroy() or abort() has released the links
  uint64_t callSig_ = 0;    // under execMu_: the running call's signature
  uint64_t callIndex_ = 0;  // under execMu_: collective calls started so far
  std::mutex queueMu_;
  std::condition_variable queueCv_;
  std::deque<std::shared_ptr<Request>> queue_;
  bool stopping_ = false;
  std::thread worker_;
};

// A nonblocking operation's completion state.
class Request {
 public:
  explicit Request(std::vector<OpArgs> ops) : ops(std::move(ops)) {}
  std::vector<OpArgs> ops;
  bool done() const { return done_.load(std::memory_order_acquire); }
  void finish(collResult_t code, std::string msg);
  // Waits for completion or until the deadline; returns false on timeout.
  bool wait(double timeoutSec);
  collResult_t result() const { return result_; }
  const std::string& message() const { return message_; }

 private:
  std::atomic<bool> done_{false};
  collResult_t result_ = collInProgress;
  std::string message_;
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace coll
