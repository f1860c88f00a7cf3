#include "comm/comm.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <span>

#include "bootstrap/protocol.hpp"
#include "coll_config.h"
#include "base/call_sig.hpp"
#include "comm/config_agree.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "comm/premul.hpp"
#include "comm/repro.hpp"
#include "comm/recovery.hpp"
#include "base/socket.hpp"
#include "base/types.hpp"
#include "base/wait.hpp"
#include "algorithms/exec.hpp"
#include "algorithms/ring_stream.hpp"
#include "topology/exchange.hpp"
#include "topology/job.hpp"
#include "topology/topology.hpp"
#include "tuning/cost_model.hpp"
#if COLL_HAVE_CUDA
#include "cuda/runtime.hpp"
#endif

namespace coll {

COLL_PARAM(kTimeout, "COLL_TIMEOUT", "300", "seconds any wait may last before it fails with collTimeout");
COLL_PARAM(kReproducible, "COLL_REPRODUCIBLE", "0",
           "1: collSum and collAvg of floating types are reproducible (as collSumReproducible and collAvgReproducible)");
COLL_PARAM(kLazyConnect, "COLL_LAZY_CONNECT", "auto",
           "1: links to peers connect when an algorithm first uses them (a ring holds two per rank); 0: every link connects at init; auto: 1 for jobs of more than 8 ranks");
COLL_PARAM(kHealthMs, "COLL_HEALTH_CHECK_MS", "20", "how often idle waiters ask the bootstrap for failures");
COLL_PARAM(kRankGpu, "COLL_RANK_GPU", "auto",
           "the GPU each rank drives, for the topology: auto (the CUDA device current when the communicator is created, if the application made one current), local-rank (the GPU numbered like the local rank), or none");

namespace {

HotParams hotParamsFrom(const Config& cfg) {
  HotParams h;
  const Backoff b(cfg);
  h.spinCount = b.spinCount();
  h.maxSleepUs = b.maxSleepUs();
  h.chunkBytes = pipelineChunkBytes(cfg);
  h.depth = pipelineDepth(cfg);
  // Process-wide (base/reduce.hpp), read where the kernels first need it; a bad value is
  // refused here, when a communicator is made, not in the middle of a call.
  (void)cfg.getSize("COLL_STREAM_MIN_BYTES");
  return h;
}

void printBannerOnce(const Comm& comm, const std::string& transports) {
  static std::once_flag once;
  std::call_once(once, [&] {
    COLL_INFO("libcollective %d.%d.%d, %d ranks, transports: %s", COLL_MAJOR, COLL_MINOR,
              COLL_PATCH, comm.nranks(), transports.c_str());
    if (logLevel() >= LogLevel::Info) {
      std::string all = comm.config().describe();
      size_t start = 0;
      while (start < all.size()) {
        size_t end = all.find('\n', start);
        COLL_INFO("  %s", all.substr(start, end - start).c_str());
        start = end + 1;
      }
    }
  });
}

}  // namespace

double timeoutSecOf(const Config& cfg) {
  const double t = static_cast<double>(cfg.getInt(kTimeout));
  COLL_CHECK_ARG(t > 0, "COLL_TIMEOUT must be positive (got ", t, ")");
  // Waits run twice the timeout through std::chrono in nanoseconds: much beyond 1e9 s that
  // overflows, and every wait returned at once as timed out (Deadline caps there too).
  COLL_CHECK_ARG(t <= 1e9, "COLL_TIMEOUT must be at most 1000000000 seconds (got ", cfg.getStr(kTimeout), ")");
  return t;
}

const CostContext& Comm::costContext() const { return selector_->model(*this).context(); }
const patterns::JobLayouts& Comm::layouts() const { return selector_->model(*this).layouts(); }

std::unique_ptr<Comm> Comm::create(const UniqueIdData& id, int rank, int nranks, const std::atomic<bool>* cancel,
                                   const ConfigOverrides& given) {
  std::unique_ptr<Comm> c(new Comm());
  LogRankScope logScope(rank);
  c->rank_ = rank;
  c->nranks_ = nranks;
  c->id_ = id;
  c->cfg_ = Config::fromEnv(given);
  c->given_ = given;
  c->timeoutSec_ = timeoutSecOf(c->cfg_);
  {
    const std::string& rep = c->cfg_.getStr(kReproducible);
    COLL_CHECK_ARG(rep == "0" || rep == "1", "COLL_REPRODUCIBLE='", rep, "' must be 0 or 1");
    c->reproducible_ = rep == "1";
  }
  c->boot_ = Bootstrap::connect(id, rank, nranks, c->timeoutSec_, cancel, localHostId(c->cfg_));
  c->cancelForming_ = cancel;
  try {
    // After joining the rendezvous, so that a rank whose tunables, COLL_ALGO or tuner
    // plugin fail (a plugin missing on one host) tells the others instead of leaving them waiting
    // for it until COLL_TIMEOUT.
    c->hot_ = hotParamsFrom(c->cfg_);
    c->yields_ = YieldGate::fromConfig(c->cfg_, 1);
    c->selector_ = std::make_unique<Selector>(c->cfg_);
    checkConfigAgrees(*c->boot_, c->cfg_);
    c->discoverTopology();
    // Transports first: the choice tells the topology which inter-host paths bypass the
    // kernel, and the tuner's agreement check builds the cost model from it.
    c->connectTransports();
    c->startTuner();
    std::vector<uint64_t> kernels;
    for (int r = 0; r < nranks; ++r) kernels.push_back(c->topo_.placement(r).kernelId);
    c->recovery_ = Recovery::create(*c->boot_, id, c->cfg_, std::move(kernels));
  } catch (const std::exception& e) {
    // Tell the other ranks at once instead of leaving them to time out.
    c->boot_->abort(std::string("rank ") + std::to_string(rank) + " failed to initialise: " + e.what());
    throw;
  }
  c->boot_->setCancel(nullptr);  // the flag's owner may go before this communicator
  c->cancelForming_ = nullptr;
  return c;
}

// A tuner plugin decides every call's algorithm on every rank, so either every rank uses
// it or none: where its init fails on some ranks only (a per-host file, memory), ranks
// with and without it would run different algorithms, failing or, where the messages
// happen to fit, returning wrong results. COLL_TUNER_PLUGIN agrees between the ranks, so
// they all take part in this round or none does.
void Comm::startTuner() {
  if (!selector_->hasTuner()) return;
  const uint8_t ok = selector_->initTuner(topo_) ? 1 : 0;
  const std::vector<uint8_t> all = boot_->allGather(&ok, 1);
  std::string failed;
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r]) failed += (failed.empty() ? "" : ", ") + std::to_string(r);
  if (!failed.empty()) {
    if (ok) COLL_WARN("the tuner plugin failed to initialise on rank(s) %s; every rank uses the cost model alone",
                      failed.c_str());
    selector_->dropTuner();
    return;
  }
  checkTunerAgrees();
}

// The plugin must pick alike on every rank (coll_tuner.h); one that reads a table or rule
// that differs between hosts does not, and ranks running different algorithms for one
// call fail with a size mismatch, time out, or return wrong sums as success. Its picks
// over a fixed grid of calls are compared here, first as a digest; a difference is an
// error that names a call on which the ranks disagree.
void Comm::checkTunerAgrees() {
  const std::vector<uint8_t> picks = selector_->tunerProbe(*this);
  uint64_t digest = 1469598103934665603ull;  // FNV-1a
  for (uint8_t b : picks) digest = (digest ^ b) * 1099511628211ull;
  const std::vector<uint8_t> digests = boot_->allGather(&digest, sizeof digest);
  bool same = true;
  for (int r = 1; r < nranks_; ++r) same = same && std::memcmp(&digests[r * sizeof digest], &digests[0], sizeof digest) == 0;
  if (same) return;
  const std::vector<uint8_t> all = boot_->allGather(picks.data(), picks.size());
  const auto& table = algorithmTable();
  auto name = [&](uint8_t pick) { return pick < table.size() ? table[pick]->name() : "?"; };
  for (size_t i = 0; i < picks.size(); ++i)
    for (int r = 1; r < nranks_; ++r)
      if (all[r * picks.size() + i] != all[i])
        COLL_THROW(collInvalidArgument, "the tuner plugin (COLL_TUNER_PLUGIN) picks differently on different ranks: ",
                   "for ", Selector::tunerProbeCase(i), " '", name(all[i]), "' on rank 0 and '",
                   name(all[r * picks.size() + i]), "' on rank ", r,
                   "; every rank must decide alike (the same table and settings everywhere)");
}

// The interface the TCP transport will use towards other hosts (the same choice:
// COLL_SOCKET_IFNAME, else the one that reaches the rendezvous root), described with its
// effective speed for the cost model. Nothing on a single host.
LocalNet Comm::interHostInterface() const {
  const std::vector<PeerInfo>& peers = boot_->peers();
  bool oneHost = std::all_of(peers.begin(), peers.end(),
                             [&](const PeerInfo& p) { return p.hostId == peers[0].hostId; });
  if (oneHost) return {};
  try {
    return describeLocalNet(chooseLocalAddrFor(id_.root, cfg_.getStr(kSocketIfnameEnv)));
  } catch (const Error& e) {
    COLL_INFO("topology: no interface speed for the cost model: %s", e.what());
    return {};
  }
}

void Comm::discoverTopology() {
  // hwloc discovery costs tens of milliseconds; ranks of one process (tests, frameworks
  // that run one communicator per thread) share the result, which never changes.
  // Keyed by COLL_TOPO_FILE, the one input that can change between communicators.
  static std::mutex mu;
  static std::map<std::string, HostTopo> cache;
  const std::string& file = cfg_.getStr("COLL_TOPO_FILE");
  HostTopo local;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(file);
    if (it == cache.end()) it = cache.emplace(file, discoverLocal(cfg_)).first;
    local = it->second;
  }
  localNet_ = interHostInterface();
  const std::string& gpuMode = cfg_.getStr(kRankGpu);
  std::string busId;
#if COLL_HAVE_CUDA
  if (gpuMode == "auto") busId = cuda::currentDeviceBusId();
#endif
  const int gpu = rankGpu(local, gpuMode, hostLocalRank(boot_->peers(), rank_), busId);
  topo_ = exchangeJobTopo(*boot_, local, LinkTable::fromConfig(cfg_), gpu, localNet_);
  ringOrder_ = coll::ringOrder(topo_);
  ringPos_ = rank_;
  bool identity = true;
  for (int p = 0; p < nranks_; ++p) {
    if (ringOrder_[p] != p) identity = false;
    if (ringOrder_[p] == rank_) ringPos_ = p;
  }
  if (identity) ringOrder_.clear();
  // More ranks than CPUs on this kernel: a waiter that spins holds the CPU that the rank
  // it waits for needs, until the scheduler takes it away (4 ranks on 2 cores: an 8-byte
  // all-reduce took 158 us with the default spin, 6 us yielding at once; a ring 5 ms
  // against 0.07 ms). Unless COLL_SPIN_COUNT is given, such ranks do not spin.
  // Their yields are how the ranks sharing a CPU take turns, and the rank that runs
  // instead may well keep it for a tick now and then (late yields of 0.2-4 ms between 4
  // ranks on 2 cores): one late yield does not turn yielding off there (wait.hpp).
  std::vector<int> mine;
  const uint64_t kernel = topo_.placement(rank_).kernelId;
  for (int r = 0; r < nranks_; ++r)
    if (kernel ? topo_.placement(r).kernelId == kernel : topo_.hostOf(r) == topo_.hostOf(rank_))
      mine.push_back(r);
  if (oversubscription(subJob(topo_, mine)) > 1.0) {
    yields_ = YieldGate::fromConfig(cfg_, 4);
    hot_.avoidSharedCpu = false;
    if (!cfg_.isSet("COLL_SPIN_COUNT")) hot_.spinCount = 0;
  }
}

void Comm::connectTransports() {
  const std::string& mode = transportMode(cfg_);
  const auto& peers = boot_->peers();
  TransportContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.cfg = &cfg_;
  ctx.bootstrap = boot_.get();
  ctx.timeoutSec = timeoutSec_;
  ctx.cancel = cancelForming_;
  ctx.root = id_.root;
  ctx.nic = topo_.placement(rank_).nicName;
  char tag[32];
  snprintf(tag, sizeof(tag), "%016llx", static_cast<unsigned long long>(id_.jobNonce));
  ctx.jobTag = tag;
  std::vector<std::string> hostnames;
  for (const auto& p : peers) {
    ctx.hostIds.push_back(p.hostId);
    ctx.pids.push_back(p.pid);
    hostnames.push_back(p.hostname);
  }
  // Which transport serves each peer. The rule is symmetric, so both ends agree.
  TransportChoice tc = planTransports(ctx, mode, hostnames);
  topo_.setNetPaths(tc.netPaths);  // before the cost model is first built (on the first call)
  const std::vector<std::string>& choice = tc.perPeer;
  transportOf_ = choice;
  links_.resize(nranks_);
  factoryOf_.assign(nranks_, -1);
  const std::string& lazyMode = cfg_.getStr(kLazyConnect);
  COLL_CHECK_ARG(lazyMode == "0" || lazyMode == "1" || lazyMode == "auto", kLazyConnect, "=", lazyMode,
                 " is not 0, 1 or auto");
  const bool lazy = lazyMode == "1" || (lazyMode == "auto" && nranks_ > 8);
  std::string used;
  // Every rank sets up every transport, in the same order, even with no peers for it,
  // because their setup exchanges run over the bootstrap in lock step.
  for (const char* name : {"shm", "tcp", "net"}) {
    if (!tc.anyNet && strcmp(name, "net") == 0) continue;  // no rank sets it up
    std::vector<int> mine;
    for (int p = 0; p < nranks_; ++p)
      if (choice[p] == name) mine.push_back(p);
    auto t = makeTransport(name);
    if (!t) COLL_THROW(collInternalError, "transport ", name, " is not built in");
    ctx.secret = id_.secret;
    std::unique_ptr<LinkFactory> f = lazy ? t->prepare(ctx, mine) : nullptr;
    if (f) {
      for (int p : mine) factoryOf_[p] = static_cast<int>(factories_.size());
      factories_.push_back(std::move(f));
    } else {
      auto links = t->connect(ctx, mine);
      for (auto& [peer, link] : links) links_[peer] = std::move(link);
    }
    if (!mine.empty()) used += used.empty() ? name : std::string(",") + name;
    transports_.push_back(std::move(t));
  }
  for (int p = 0; p < nranks_; ++p)
    if (p != rank_ && !links_[p] && factoryOf_[p] < 0) COLL_THROW(collInternalError, "no link to rank ", p);
  printBannerOnce(*this, used.empty() ? "none (1 rank)" : used);
  reportMemory("at init");
}

// What this communicator holds for its links: the report of COLL_DEBUG=INFO.
void Comm::reportMemory(const char* when) const {
  if (logLevel() < LogLevel::Info) return;
  size_t mapped = 0, fds = 0;
  int lazyLeft = 0;
  for (int p = 0; p < nranks_; ++p) {
    if (links_[p]) mapped += links_[p]->memoryBytes();
    else lazyLeft += p != rank_ && factoryOf_[p] >= 0;
  }
  for (const auto& f : factories_) fds += f->descriptors();
  size_t scratch = 0;
  for (const auto& b : scratch_) scratch += b.capacity();
  COLL_INFO("communicator memory %s: %d links connected, %zu KiB of shared rings mapped, %zu KiB of scratch, %d "
            "peers to connect on first use (%zu descriptors held for that)", when, connectedLinks(), mapped >> 10,
            scratch >> 10, lazyLeft, fds);
}

Link& Comm::link(int peer) {
  if (peer < 0 || peer >= nranks_ || !links_[peer]) connectOnFirstUse(peer);
  return *links_[peer];
}

int Comm::connectedLinks() const {
  int n = 0;
  for (const auto& l : links_) n += l != nullptr;
  return n;
}

// Called by the algorithms' first post to `peer`, in the thread running the operation.
// The factory never waits for the peer's algorithm (LinkFactory), so ranks reaching
// each other in any order cannot deadlock; the peer's own first use meets this one.
void Comm::connectOnFirstUse(int peer) {
  COLL_CHECK_ARG(peer >= 0 && peer < nranks_ && peer != rank_, "link: rank ", peer, " is not a peer of rank ", rank_,
                 " in a communicator of ", nranks_);
  if (closed_) COLL_THROW(collInvalidUsage, "the communicator was destroyed or aborted by another thread");
  const int f = factoryOf_.at(peer);
  if (f < 0) COLL_THROW(collInternalError, "no link to rank ", peer);
  try {
    links_[peer] = factories_[f]->connect(peer, Deadline(timeoutSec_));
  } catch (const Error& e) {
    // A peer that is gone (its host died) usually shows here first: name it.
    COLL_THROW(e.code(), "rank ", rank_, " could not connect to ", bs::describeRank(peer, peers().at(peer)),
               " over ", transportOf_[peer], ": ", e.what());
  }
  COLL_TRACE("connected to rank %d over %s on first use (%d links now)", peer, transportOf_[peer].c_str(),
             connectedLinks());
  if ((connectedLinks() & (connectedLinks() - 1)) == 0) reportMemory("after a first use");
}

Comm::~Comm() {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    stopping_ = true;
  }
  queueCv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void* Comm::scratch(size_t bytes, int slot) {
  if (scratch_.size() <= static_cast<size_t>(slot)) scratch_.resize(slot + 1);
  auto& s = scratch_[slot];
  if (s.size() < bytes) {
    s.clear();
    s.shrink_to_fit();
    s.resize(bytes);
  }
  return s.data();
}

void Comm::setAsyncError(collResult_t code, const std::string& msg) {
  std::lock_guard<std::mutex> lock(errMu_);
  if (asyncError_.load() == collSuccess) {
    asyncErrorText_ = msg;
    asyncError_.store(code);
  }
}

std::string Comm::asyncErrorText() const {
  std::lock_guard<std::mutex> lock(errMu_);
  return asyncErrorText_;
}

void Comm::checkHealth(const Deadline& deadline, const char* what, std::span<const int> waitedOn) {
  if (aborted_.load(std::memory_order_relaxed))
    COLL_THROW(collRemoteError, what, ": the communicator was aborted");
  if (revoked_.load(std::memory_order_relaxed)) COLL_THROW(collRevoked, what, ": ", asyncErrorText());
  auto now = std::chrono::steady_clock::now();
  auto every = std::chrono::milliseconds(cfg_.getInt(kHealthMs));
  if (now - lastHealthCheck_ < every) return;
  lastHealthCheck_ = now;
  int revoker = -1;
  if (recovery_ && recovery_->pollNotices(&revoker)) {
    revoke(strCat("the communicator was revoked by rank ", revoker), false);
    COLL_THROW(collRevoked, what, ": ", asyncErrorText());
  }
  if (deadline.expired()) {
    // Name the peers whose transfers are still open: on a cut link or a frozen host those
    // include the unreachable ones, which "a peer" alone left the user to find.
    std::string waiting;
    int named = 0;
    for (int p : waitedOn) {
      if (p == rank_ || !links_[p] || !links_[p]->pending()) continue;
      if (named++ == 8) { waiting += ", ..."; break; }
      waiting += strCat(waiting.empty() ? "; still waiting on " : ", ",
                        bs::describeRank(p, peers().at(p)), " over ", links_[p]->transportName());
    }
    // Which call this rank is in: where ranks wait in different calls without a message
    // between them, the ranks' timeout messages side by side show it.
    COLL_THROW(collTimeout, what, " on rank ", rank_, " did not complete within COLL_TIMEOUT=",
               timeoutSec_, " s", waiting, " (a peer may be stuck, dead or unreachable",
               callSig_ ? strCat(", or in another call than this rank's ", describeCall(callSig_)) : std::string(), ")");
  }
  std::string why;
  if (boot_->failureReported(&why)) COLL_THROW(collRemoteError, what, " failed: ", why);
  // Calls that differ can also leave every rank waiting for a message nobody sends, with
  // the messages that were sent unclaimed (a barrier on one rank, an all-reduce on the
  // others): the first such message says how the calls differ.
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_ || !links_[p]) continue;
    const uint64_t theirs = links_[p]->unclaimedCall();
    if (unclaimable(theirs, callSig_))
      COLL_THROW(collInvalidUsage, what, ": ", callMismatchText(p, theirs, rank_, callSig_));
  }
}

void Comm::run(std::vector<OpArgs> ops) {
  if (revoked_.load(std::memory_order_acquire)) COLL_THROW(collRevoked, asyncErrorText());
  if (asyncError_.load() != collSuccess)
    COLL_THROW(asyncError_.load(), "communicator is unusable after an earlier error: ",
               asyncErrorText());
  {
    std::unique_lock<std::mutex> lock(queueMu_);
    if (!queue_.empty()) {  // keep issue order behind queued nonblocking work
      lock.unlock();
      auto req = submit(std::move(ops));
      if (!req->wait(timeoutSec_ * 2))
        COLL_THROW(collTimeout, "operation queued behind nonblocking work did not finish");
      if (req->result() != collSuccess) COLL_THROW(req->result(), req->message());
      return;
    }
  }
  std::lock_guard<std::mutex> exec(execMu_);
  executeOps(ops.data(), ops.size());
}

void Comm::run(const OpArgs& op) {
  if (op.isP2P() || asyncError_.load() != collSuccess || pending_.load(std::memory_order_acquire) != 0) {
    run(std::vector<OpArgs>{op});
    return;
  }
  std::lock_guard<std::mutex> exec(execMu_);
  executeOps(&op, 1);
}

void Comm::executeOps(const OpArgs* opsBegin, size_t nops) {
  LogRankScope logScope(rank_);
  // A call that found the handle live just before another thread destroyed or aborted it.
  if (closed_) COLL_THROW(collInvalidUsage, "the communicator was destroyed or aborted by another thread");
  try {
    // Collectives run in issue order; point-to-point calls of one batch (a group) are
    // posted together afterwards so that matching sends and receives cannot deadlock.
    std::vector<const OpArgs*> p2p;
    for (const OpArgs& op : std::span<const OpArgs>(opsBegin, nops)) {
      if (op.isP2P()) {
        p2p.push_back(&op);
        continue;
      }
      callSig_ = callSignature(op, callIndex_++);
      if (op.count == 0 && op.kind != OpKind::Barrier) continue;
      if (op.kind == OpKind::Barrier) {
        OpArgs b = op;
        b.kind = OpKind::AllReduce;
        b.dtype = collUint8;
        b.op = collMax;
        b.count = 1;
        uint8_t one = 1, out = 0;
        b.sendbuf = &one;
        b.recvbuf = &out;
        selector_->select(*this, b).run(*this, b);
        continue;
      }
      // A pre-multiplied sum runs as the plain sum of this rank's scaled input.
      OpArgs plain = op.preMul ? stagePreMul(*this, op) : op;
      if (runsReproducibly(plain, reproducible_)) {
        COLL_TRACE("%s count %zu %s %s reproducibly", opKindName(op.kind), op.count, typeName(op.dtype),
                   op.preMul ? "premulsum" : opName(op.op));
        runReproducible(*this, plain, [this](const OpArgs& sub) { selector_->select(*this, sub).run(*this, sub); });
        continue;
      }
      plain.op = integerPlainOp(plain.op);  // integer sums are exact: reproducible already
      const Algorithm& algo = selector_->select(*this, plain);
      COLL_TRACE("%s count %zu %s %s with %s", opKindName(op.kind), op.count, typeName(op.dtype),
                 op.preMul ? "premulsum" : opName(op.op), algo.name());
      algo.run(*this, plain);
    }
    if (!p2p.empty()) executeP2P(p2p);
  } catch (const Error& e) {
    operationFailed(e);
    COLL_WARN("%s", e.what());
    throw;
  }
}

// The communicator is unusable from here on. A failure found on this rank (calls that
// differ, a system error) is also reported to the job: the other ranks cannot complete
// anything with this one any more, and at their next health check they fail with its
// reason instead of waiting out COLL_TIMEOUT. A peer's failure, or a timeout (which every
// waiting rank reaches by itself), is no news to the job; a link's failure that only this
// end saw (LinkError) is.
void Comm::operationFailed(const Error& e) {
  const bool first = asyncError_.load() == collSuccess;
  setAsyncError(e.code(), e.what());
  // Before the user gets the buffers back: no transport may still be moving bytes of them.
  for (auto& l : links_)
    if (l) l->abandon();
  // A revoke reaches the peers through their notice ports (comm/recovery.hpp).
  const bool news = (e.code() != collRemoteError && e.code() != collTimeout && e.code() != collRevoked) ||
                    dynamic_cast<const LinkError*>(&e);
  if (first && news && boot_)
    boot_->abort(strCat("its communicator failed: ", e.what()));
}

namespace {
bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return an && bn && x < y + bn && y < x + an;
}
}  // namespace

void checkSelfPairs(int rank, const std::vector<const OpArgs*>& ops) {
  std::vector<size_t> sends, recvs;
  for (const OpArgs* op : ops)
    if (op->isP2P() && op->root == rank)
      (op->kind == OpKind::Send ? sends : recvs).push_back(op->count * typeSize(op->dtype));
  COLL_ENFORCE_EQ(sends.size(), recvs.size(), collInvalidUsage,
                  "sends to self and receives from self in one group must pair up");
  for (size_t i = 0; i < sends.size(); ++i)
    COLL_ENFORCE_EQ(sends[i], recvs[i], collInvalidUsage, "send to self number ", i,
                    " and the receive from self it pairs with differ in size");
}

void Comm::executeP2P(const std::vector<const OpArgs*>& ops) {
  checkSelfPairs(rank_, ops);
  callSig_ = p2pSignature();
  Progress pg(*this, "send/recv");
  // A send whose buffer a receive of the same group also writes (an in-place exchange:
  // send a buffer, receive its replacement) leaves from a copy taken now: single-copy
  // peers read send buffers in place, and the receive may land first.
  std::vector<std::vector<char>> staged;
  std::vector<const void*> sendFrom(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpArgs& op = *ops[i];
    if (op.kind != OpKind::Send) continue;
    sendFrom[i] = op.sendbuf;
    const size_t bytes = op.count * typeSize(op.dtype);
    for (const OpArgs* r : ops) {
      if (r->kind != OpKind::Recv || !overlaps(op.sendbuf, bytes, r->recvbuf, r->count * typeSize(r->dtype)))
        continue;
      const char* src = static_cast<const char*>(op.sendbuf);
      sendFrom[i] = staged.emplace_back(src, src + bytes).data();
      break;
    }
  }
  std::vector<Xfer> xs(ops.size());
  std::vector<Xfer*> wait;
  std::vector<const OpArgs*> selfSends, selfRecvs;
  std::vector<const void*> selfFrom;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpArgs& op = *ops[i];
    size_t bytes = op.count * typeSize(op.dtype);
    if (op.root == rank_) {
      (op.kind == OpKind::Send ? selfSends : selfRecvs).push_back(&op);
      if (op.kind == OpKind::Send) selfFrom.push_back(sendFrom[i]);
      continue;
    }
    if (op.kind == OpKind::Send) pg.send(op.root, sendFrom[i], bytes, &xs[i]);
    else pg.recv(op.root, op.recvbuf, bytes, &xs[i], true);  // the sender only waits: let it help
    wait.push_back(&xs[i]);
  }
  for (size_t i = 0; i < selfSends.size(); ++i)  // paired and sized alike: checked above
    if (selfSends[i]->count) memmove(selfRecvs[i]->recvbuf, selfFrom[i], selfSends[i]->count * typeSize(selfSends[i]->dtype));
  pg.waitAll(wait.data(), wait.size());
}

void Comm::abort(const std::string& why) {
  aborted_.store(true);
  setAsyncError(collRemoteError, "communicator aborted: " + why);
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    stopping_ = true;
    for (auto& req : queue_) req->finish(collRemoteError, "communicator aborted");
  }
  queueCv_.notify_all();
  // Operations in flight notice the abort flag at their next health check and leave.
  std::lock_guard<std::mutex> exec(execMu_);
  closed_ = true;
  if (boot_) boot_->abort(why);
  links_.clear();
  factories_.clear();
  transports_.clear();
}

void Comm::revoke(const std::string& why, bool tellPeers) {
  {
    std::lock_guard<std::mutex> lock(errMu_);
    if (!revoked_.load()) {
      asyncErrorText_ = why;
      asyncError_.store(collRevoked);
      revoked_.store(true, std::memory_order_release);
    }
  }
  if (tellPeers && recovery_) recovery_->sendRevoke();
}

void Comm::destroy() {
  {
    std::unique_lock<std::mutex> lock(queueMu_);
    stopping_ = true;
  }
  queueCv_.notify_all();
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> exec(execMu_);
  // Pending nonblocking work that never started is failed rather than dropped silently.
  for (auto& req : queue_)
    if (!req->done()) req->finish(collInvalidUsage, "communicator destroyed before the operation ran");
  closed_ = true;
  links_.clear();
  factories_.clear();
  transports_.clear();
  if (boot_) boot_->close();
}

}  // namespace coll
