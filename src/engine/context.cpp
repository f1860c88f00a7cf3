// ContextImpl: construction, host layout, process sets and shutdown.
#include "engine/context.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "base/error.hpp"
#include "base/log.hpp"

namespace collective::hvd {

using coll::engine::Collectives;
using coll::engine::Engine;

COLL_PARAM(kTimeline, "COLL_TIMELINE", "", "engine: Chrome-trace JSON file (%r: rank; without it only rank 0 writes)");
COLL_PARAM(kSyncTimeout, "COLL_SYNCHRONIZE_TIMEOUT", "3600", "engine: longest wait of synchronize(), in seconds (0: unbounded)");

ContextImpl::ContextImpl(std::unique_ptr<Collectives> global, const coll::Config& cfg)
    : params_(coll::engine::EngineParams::fromConfig(cfg)),
      syncTimeout_(cfg.getDouble(kSyncTimeout)) {
  coll::engine::checkWaitSeconds(kSyncTimeout, syncTimeout_);
  rank_ = global->rank();
  size_ = global->size();
  // A rank that cannot open its timeline must not leave the others with engines that
  // wait for it in every round: whether each rank succeeded travels with the host names,
  // and then every rank fails or none does.
  std::string path = coll::engine::Timeline::pathForRank(cfg.getStr(kTimeline), rank_);
  std::exception_ptr timelineError;
  if (!path.empty()) {
    try {
      timeline_ = std::make_unique<coll::engine::Timeline>(path, rank_);
    } catch (const coll::Error&) {
      timelineError = std::current_exception();
    }
  }
  // Idle until start_timeline when COLL_TIMELINE is unset.
  if (!timeline_) timeline_ = std::make_unique<coll::engine::Timeline>(rank_);
  int failedRank = findHostLayout(*global, timelineError != nullptr);
  if (timelineError) std::rethrow_exception(timelineError);
  if (failedRank >= 0)
    COLL_THROW(collSystemError, "COLL_TIMELINE: rank ", failedRank,
               " cannot open its timeline file (its error says why); no rank starts the engine");
  Set world;
  for (int r = 0; r < size_; ++r) world.ranks.push_back(r);
  world.engine = std::make_unique<Engine>(std::move(global), params_, timeline_.get(), 0);
  sets_[0] = std::move(world);
}

ContextImpl::~ContextImpl() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    COLL_WARN("hvd context shutdown: %s", e.what());
  }
}

// Ranks on one host share a host name. local_rank orders them by global rank; cross
// ranks are the ranks with the same local_rank on the other hosts. Each rank's entry also
// says whether it failed to set up; returns the lowest such rank, or -1.
int ContextImpl::findHostLayout(Collectives& global, bool iFailed) {
  constexpr size_t kName = 64, kEntry = kName + 1;
  char mine[kEntry] = {0};
  gethostname(mine, kName - 1);
  mine[kName] = iFailed ? 1 : 0;
  std::vector<char> all(kEntry * size_);
  global.allgather(mine, all.data(), kEntry, collUint8);
  int failedRank = -1;
  for (int r = size_ - 1; r >= 0; --r)
    if (all[r * kEntry + kName]) failedRank = r;
  auto host = [&](int r) { return std::string(all.data() + r * kEntry, strnlen(all.data() + r * kEntry, kName)); };
  std::vector<int> localRankOf(size_, 0);
  localSize_ = 0;
  for (int r = 0; r < size_; ++r) {
    for (int q = 0; q < r; ++q) localRankOf[r] += host(q) == host(r) ? 1 : 0;
    if (host(r) == host(rank_)) ++localSize_;
  }
  localRank_ = localRankOf[rank_];
  crossSize_ = 0;
  crossRank_ = 0;
  for (int r = 0; r < size_; ++r) {
    if (localRankOf[r] != localRank_) continue;
    if (r < rank_) ++crossRank_;
    ++crossSize_;
  }
  return failedRank;
}

void ContextImpl::shutdown() {
  std::map<int, Set> sets;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (shutDown_) return;
    shutDown_ = true;
    sets.swap(sets_);
  }
  // Sub-sets first, in id order (the same on every rank), then the global set whose
  // engine the sub-sets were split from.
  for (auto it = sets.rbegin(); it != sets.rend(); ++it)
    if (it->second.engine) it->second.engine->shutdown();
  sets.clear();
  timeline_.reset();
}

void ContextImpl::startTimeline(const std::string& pattern, bool markCycles) {
  COLL_CHECK_ARG(!pattern.empty(), "start_timeline: the file path is empty");
  std::lock_guard<std::mutex> lk(mu_);
  if (shutDown_ || !timeline_) throw Error(collInvalidUsage, "start_timeline: the context was shut down");
  // The COLL_TIMELINE rule: "%r" becomes the rank; without it only rank 0 writes.
  const std::string path = coll::engine::Timeline::pathForRank(pattern, rank_);
  if (!path.empty()) timeline_->start(path, markCycles);
}

void ContextImpl::stopTimeline() {
  std::lock_guard<std::mutex> lk(mu_);
  if (timeline_) timeline_->stop();
}

const ContextImpl::Set& ContextImpl::setFor(ProcessSet ps) const {
  auto it = sets_.find(ps.id());
  if (it == sets_.end())
    throw Error(collInvalidArgument, coll::strCat("process set ", ps.id(), " does not exist",
                                                  shutDown_ ? " (the context was shut down)" : ""));
  return it->second;
}

std::shared_ptr<Engine> ContextImpl::engineFor(ProcessSet ps, const std::string& what) const {
  std::lock_guard<std::mutex> lk(mu_);
  const Set& s = setFor(ps);
  if (!s.engine)
    throw Error(collInvalidUsage, coll::strCat(what, ": rank ", rank_, " is not a member of process set ",
                                               ps.id()));
  return s.engine;
}

ProcessSet ContextImpl::addProcessSet(const std::vector<int>& ranksIn) {
  std::vector<int> ranks = ranksIn;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) throw Error(collInvalidArgument, "add_process_set: empty rank list");
  for (int r : ranks)
    if (r < 0 || r >= size_)
      throw Error(collInvalidArgument, coll::strCat("add_process_set: rank ", r, " is outside [0, ", size_, ")"));
  auto e = std::make_unique<coll::engine::Entry>();
  e->meta.name = "__add_process_set";
  e->meta.op = coll::engine::OpType::AddProcessSet;
  e->meta.dtype = collUint8;
  e->meta.ranks.assign(ranks.begin(), ranks.end());
  auto h = newHandle(1);
  e->handle = h;
  try {
    engineFor(ProcessSet{0}, "add_process_set")->submit(std::move(e));
  } catch (const coll::Error& err) {
    throw Error(err.code(), err.what());
  }
  h->wait();
  std::lock_guard<std::mutex> lk(mu_);
  int id = nextSetId_++;
  Set s;
  s.ranks = ranks;
  if (h->collectives)
    s.engine = std::make_unique<Engine>(std::move(h->collectives), params_, timeline_.get(), id);
  sets_[id] = std::move(s);
  return ProcessSet{id};
}

void ContextImpl::removeProcessSet(ProcessSet ps) {
  if (ps.id() == 0) throw Error(collInvalidArgument, "remove_process_set: the global process set cannot be removed");
  std::shared_ptr<Engine> engine;
  {
    std::lock_guard<std::mutex> lk(mu_);
    setFor(ps);
    engine = std::move(sets_[ps.id()].engine);
    sets_.erase(ps.id());
  }
  if (engine) engine->shutdown();
}

std::vector<int> ContextImpl::processSetRanks(ProcessSet ps) const {
  std::lock_guard<std::mutex> lk(mu_);
  return setFor(ps).ranks;
}

int ContextImpl::processSetRank(ProcessSet ps) const {
  std::lock_guard<std::mutex> lk(mu_);
  const Set& s = setFor(ps);
  return s.engine ? s.engine->rank() : -1;
}

Stats ContextImpl::stats(ProcessSet ps) const { return engineFor(ps, "stats")->stats(); }

std::vector<std::string> ContextImpl::stallReports(ProcessSet ps) const {
  return engineFor(ps, "stall reports")->stallReports();
}

std::shared_ptr<detail::HandleState> ContextImpl::newHandle(int parts) const {
  return std::make_shared<detail::HandleState>(parts, syncTimeout_);
}

}  // namespace collective::hvd
