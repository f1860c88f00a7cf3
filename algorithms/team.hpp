// What an algorithm sees of its communicator: the ranks, a link to each peer, the job's
// topology and layouts, the cost context, scratch memory, the tunables read per call and
// the communicator's health checks. The communicator (src/comm) implements it; the
// algorithms, their selection (src/tuning) and the device algorithms see nothing else of
// it, so the layers below the communicator never include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/op.hpp"
#include "topology/job.hpp"
#include "topology/layout.hpp"

namespace coll {

class Config;
class CostContext;
class Deadline;
class Link;
class YieldGate;

// Tunables read on every operation, parsed once when the communicator is made (a Config
// lookup costs about as much as an 8-byte all-reduce over shared memory).
struct HotParams {
  int spinCount = 2000;
  int maxSleepUs = 200;
  size_t chunkBytes = 512 << 10;
  int depth = 4;
  // A waiter whose peer last waited on its own CPU stops spinning and, again and again
  // there, steps off that CPU (algorithms/exec.cpp). Off where the job's ranks outnumber
  // their CPUs: there they share CPUs by design and take turns by yielding.
  bool avoidSharedCpu = true;
};

class Team {
 public:
  virtual ~Team() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual const Config& config() const = 0;
  virtual double timeoutSec() const = 0;
  virtual const HotParams& hot() const = 0;
  // Whether its waiters yield now (base/wait.hpp), shared by all of them.
  virtual YieldGate& yieldGate() = 0;
  // Hosts, local ranks, leaders, path classes and ring order of the job.
  virtual const JobTopo& topology() const = 0;
  // The layouts (ring, locality and host grid) the topology-aware algorithms follow, and
  // the cost context the algorithms price themselves with and look up per-job figures of
  // their own in (both built on first use).
  virtual const patterns::JobLayouts& layouts() const = 0;
  virtual const CostContext& costContext() const = 0;
  // The topology's ring order (ranks of a host together, NUMA/PCI/NIC locality; the same
  // on every rank) for flat rings, or null when it is plain rank order; this rank's
  // position in it (its rank when ringOrder() is null).
  virtual const int* ringOrder() const = 0;
  virtual int ringPosition() const = 0;
  // The link to a peer (never self).
  virtual Link& link(int peer) = 0;
  // The signature (base/call_sig.hpp) of the call running now, stamped on every transfer.
  virtual uint64_t currentCall() const = 0;
  // Scratch memory owned by the communicator (grown on demand, reused across calls).
  virtual void* scratch(size_t bytes, int slot = 0) = 0;
  // Called by waiters that made no progress: backs off, enforces the deadline, notices
  // aborts and failures reported by the bootstrap. Throws coll::Error. `waitedOn`: the
  // peers the waiter has posted transfers to; a timeout names those still open.
  virtual void checkHealth(const Deadline& deadline, const char* what, std::span<const int> waitedOn = {}) = 0;
  // Runs a host-buffer collective on this communicator as a call of the application's
  // would (selection included): for device algorithms, which keep their ranks in step
  // through host collectives, and fall back to host staging.
  virtual void run(const OpArgs& op) = 0;
};

}  // namespace coll
