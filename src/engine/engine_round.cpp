// One negotiation round (see engine.hpp for the protocol).
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/types.hpp"
#include "engine/engine.hpp"
#include "engine/wire.hpp"

namespace coll::engine {

// Sorts fresh submissions: cache hits wait on their slot, everything else goes to the
// next full negotiation. A request that contradicts its cache entry invalidates the
// slot on every rank, so both versions meet in the negotiation and fail there by name.
void Engine::intake(double nowS) {
  auto fresh = queue_.drain();
  // The negotiation holds a group's members until all of them are decided, so a group
  // takes one path: if any member misses the cache (full, or its request changed), the
  // members that hit are invalidated too and every rank negotiates the whole group.
  // (A grouped call's members are queued, and so drained, together.)
  std::unordered_set<std::string> groupsMissing;
  for (const auto& e : fresh)
    if (!e->meta.group.empty() && cache_.lookup(e->meta).kind != ResponseCache::Kind::Hit)
      groupsMissing.insert(e->meta.group);
  for (auto& e : fresh) {
    e->drained = Clock::now();
    if (timeline_)
      timeline_->span(e->meta.name, "queue", opTypeName(e->meta.op), e->submitted, e->drained);
    if (e->meta.op == OpType::Join) {
      joined_ = true;
      uncached_.push_back(std::move(e));
      continue;
    }
    auto look = cache_.lookup(e->meta);
    bool wholeGroup = e->meta.group.empty() || !groupsMissing.count(e->meta.group);
    if (look.kind == ResponseCache::Kind::Hit && wholeGroup && !cachedPending_.count(look.slot)) {
      cachedPending_[look.slot] = std::move(e);
      continue;
    }
    if (look.kind == ResponseCache::Kind::Mismatch || (look.kind == ResponseCache::Kind::Hit && !wholeGroup))
      invalidate_.push_back(look.slot);
    uncached_.push_back(std::move(e));
  }
  // A cache hit that waits long for other ranks goes to the full negotiation, where the
  // stall inspector can see which ranks are missing.
  double moveAfter = p_.stall.warnSeconds / 2;
  if (moveAfter > 0) {
    for (auto& [slot, e] : cachedPending_) {
      double waited = std::chrono::duration<double>(Clock::now() - e->drained).count();
      if (waited > moveAfter) invalidate_.push_back(slot);
    }
  }
  (void)nowS;
}

LocalControl Engine::buildControl(double) {
  LocalControl lc;
  lc.hasUncached = !uncached_.empty();
  lc.wantsShutdown = wantShutdown_;
  lc.abort = !abortReason_.empty();
  lc.busy = !uncached_.empty() || !cachedPending_.empty() || !negotiating_.empty();
  lc.slots.assign(cache_.slotCount(), kSlotIdle);
  lc.held.assign(cache_.slotCount(), false);
  for (uint32_t s = 0; s < lc.slots.size(); ++s) {
    if (cachedPending_.count(s)) {
      lc.slots[s] = kSlotPending;
      lc.held[s] = true;
    } else if (joined_ && cache_.occupied(s)) {
      // A joined rank stands in with zeros for any Sum or Average allreduce; anything
      // else (zeros would change a Min, Max or Product) cannot run while it is joined, so
      // those entries go back to the full negotiation (which reports the error by name).
      const RequestMeta& m = cache_.response(s).meta;
      bool ar = m.op == OpType::Allreduce && zerosNeutral(m.redOp);
      lc.slots[s] = ar ? kSlotPending : kSlotInvalid;
    }
  }
  for (uint32_t s : invalidate_)
    if (s < lc.slots.size()) lc.slots[s] = kSlotInvalid;
  invalidate_.clear();
  if (p_.fusion.directAuto) lc.directLog2 = proposedDirectLog2();
  if (tuner_) lc.tune = TuneControl{tuner_->current(), tuner_->done()};
  return lc;
}

uint8_t Engine::proposedDirectLog2() const {
  size_t n = std::min(controlRounds_, controlUs_.size());
  if (n == 0) return kDirectUnknown;
  return directLog2ForLatency(*std::min_element(controlUs_.begin(), controlUs_.begin() + n));
}

std::vector<std::vector<RequestMeta>> Engine::exchangeRequests() {
  std::vector<RequestMeta> mine;
  for (auto& e : uncached_) mine.push_back(e->meta);
  for (auto& e : uncached_) {
    std::string name = e->meta.name;
    negotiating_[name] = std::move(e);
  }
  uncached_.clear();
  std::vector<uint8_t> msg = encodeRequests(mine);
  // Lengths first, then every message padded to the longest.
  std::vector<uint64_t> lens(size_);
  uint64_t myLen = msg.size();
  c_->allgather(&myLen, lens.data(), 1, collUint64);
  uint64_t maxLen = *std::max_element(lens.begin(), lens.end());
  msg.resize(maxLen);
  std::vector<uint8_t> all(maxLen * size_);
  c_->allgather(msg.data(), all.data(), maxLen, collUint8);
  std::vector<std::vector<RequestMeta>> out(size_);
  for (int r = 0; r < size_; ++r) {
    if (lens[r] > maxLen) COLL_THROW(collRemoteError, "negotiation: bad message length from rank ", r);
    out[r] = decodeRequests(all.data() + r * maxLen, lens[r]);
  }
  return out;
}

void Engine::collectReady(const RoundDecision& d, double nowS, std::vector<Ready>& ready) {
  for (uint32_t s : d.ready) {
    if (!cache_.occupied(s)) COLL_THROW(collInternalError, "response cache slot ", s, " is empty");
    EntryPtr e;
    if (auto it = cachedPending_.find(s); it != cachedPending_.end()) {
      e = std::move(it->second);
      cachedPending_.erase(it);
    }
    ready.push_back({cache_.response(s), std::move(e)});
    ++counters_.cacheHits;
  }
  for (uint32_t s : d.invalidated) {
    if (auto it = cachedPending_.find(s); it != cachedPending_.end()) {
      uncached_.push_back(std::move(it->second));
      cachedPending_.erase(it);
    }
    cache_.erase(s);
  }
  if (!d.slowPath) return;
  negotiator_.addRound(exchangeRequests(), nowS);
  for (auto& resp : negotiator_.takeReady()) {
    EntryPtr e;
    if (auto it = negotiating_.find(resp.name()); it != negotiating_.end()) {
      e = std::move(it->second);
      negotiating_.erase(it);
    }
    if (!e && !resp.error && resp.meta.op != OpType::Join &&
        std::find(resp.joined.begin(), resp.joined.end(), rank_) == resp.joined.end())
      COLL_THROW(collInternalError, "negotiation decided tensor '", resp.name(),
                 "' which rank ", rank_, " never submitted");
    ++counters_.negotiated;
    ready.push_back({std::move(resp), std::move(e)});
  }
}

bool Engine::cycle() {
  ++counters_.cycles;
  double t = now();
  intake(t);
  std::vector<uint8_t> ctl = encodeControl(buildControl(t));
  auto sent = Clock::now();
  c_->allreduce(ctl.data(), ctl.data(), ctl.size(), collUint8, collMin);
  controlUs_[controlRounds_++ % controlUs_.size()] =
      std::chrono::duration<double, std::micro>(Clock::now() - sent).count();
  RoundDecision d = decodeControl(ctl);
  if (d.tune) applyTuned(*d.tune);
  if (p_.fusion.directAuto) {
    roundFusion_.directBytes = directBytesFromLog2(d.directLog2);
    counters_.directBytes = roundFusion_.directBytes;
  }
  if (d.abort) {
    std::string why = abortReason_.empty() ? stall_.followerReason(negotiator_, now()) : abortReason_;
    failAll(collTimeout, strCat("engine of process set ", processSet_, " shut down: ", why));
    return false;
  }
  idleRounds_ = d.anyBusy ? 0 : idleRounds_.load() + 1;
  std::vector<Ready> ready;
  try {
    collectReady(d, t, ready);
    execute(ready);
    tuneAfterRound(ready);
  } catch (const Error& e) {
    // Entries taken out of the engine's tables for this round are failed here; failAll
    // (in loop) handles the rest.
    for (auto& r : ready)
      if (r.entry) complete(*r.entry, e.code(), e.what());
    throw;
  }
  if (rank_ == 0) inspectStalls(now());
  if (timeline_) timeline_->flush();
  if (d.shutdown) {
    // As in Horovod: one rank's shutdown (it finished, or it failed and is going away)
    // stops the engine everywhere, so that work the others still wait for fails now
    // instead of when that rank's process ends or a timeout expires.
    failAll(collInvalidUsage,
            wantShutdown_ ? strCat("engine of process set ", processSet_, " shut down before this operation completed")
                          : strCat("engine of process set ", processSet_,
                                   " shut down: another rank shut down its engine (it finished, or it failed) "
                                   "before this operation completed"));
    return false;
  }
  return true;
}

void Engine::execute(std::vector<Ready>& ready) {
  if (ready.empty()) return;
  std::vector<Response> resps;
  resps.reserve(ready.size());
  for (auto& r : ready) resps.push_back(r.resp);
  auto readyAt = Clock::now();
  if (timeline_) timeline_->cycle(readyAt);
  if (timeline_)
    for (auto& r : ready)
      if (r.entry) timeline_->span(r.resp.name(), "negotiate", opTypeName(r.resp.meta.op),
                                   r.entry->drained, readyAt);
  // Uncompressed allreduces are issued without waiting and finished in issue order; at
  // most two fused ones are in flight (two staging buffers). Anything else first lets
  // everything in flight finish, which keeps completions in plan order.
  struct Issued {
    std::unique_ptr<Executor::InFlight> f;
    std::vector<size_t> members;
  };
  std::vector<Issued> inflight;
  size_t fusedInFlight = 0;
  auto finishAll = [&] {
    for (auto& is : inflight) {
      executor_.finishAllreduce(*is.f);
      for (size_t i : is.members) finishEntry(ready[i]);
    }
    inflight.clear();
    fusedInFlight = 0;
  };
  for (const FusionGroup& g : planFusion(resps, roundFusion_)) {
    Ready& first = ready[g.members[0]];
    std::vector<Entry*> local;
    for (size_t i : g.members) local.push_back(ready[i].entry.get());
    if (!first.resp.error && Executor::isAsyncAllreduce(first.resp)) {
      if (g.useBuffer && fusedInFlight == 2) finishAll();
      BufferSlot slot = fusedInFlight == 0 ? BufferSlot::Fused : BufferSlot::FusedAlt;
      inflight.push_back({executor_.startAllreduce(resps, g, local, slot), g.members});
      if (g.useBuffer) ++fusedInFlight;
      continue;
    }
    if (first.resp.error) {  // no collective: nothing to wait for
      runSpecial(first);
      continue;
    }
    finishAll();
    OpType op = first.resp.meta.op;
    if (op == OpType::Join || op == OpType::AddProcessSet) {
      runSpecial(first);
      continue;
    }
    executor_.run(resps, g, local);
    for (size_t i : g.members) finishEntry(ready[i]);
  }
  finishAll();
  // Identical responses in identical order on every rank keep the caches identical.
  for (const auto& r : resps) cache_.insert(r);
}

void Engine::finishEntry(Ready& r) {
  if (!r.entry) return;
  complete(*r.entry, collSuccess, "");
  r.entry.reset();
}

void Engine::runSpecial(Ready& r) {
  const Response& resp = r.resp;
  if (resp.error) {
    if (r.entry) complete(*r.entry, resp.errorCode, resp.errorMessage);
    r.entry.reset();
    return;
  }
  if (resp.meta.op == OpType::Join) {
    joined_ = false;
    if (r.entry) {
      r.entry->handle->value = resp.lastJoined;
      complete(*r.entry, collSuccess, "");
      r.entry.reset();
    }
    return;
  }
  // AddProcessSet: members keep their order from this group (key = rank).
  const auto& ranks = resp.meta.ranks;
  bool member = std::find(ranks.begin(), ranks.end(), rank_) != ranks.end();
  auto sub = c_->split(member ? 0 : COLL_SPLIT_NOCOLOR, rank_);
  ++counters_.collectives;
  if (r.entry) {
    r.entry->handle->collectives = std::move(sub);
    complete(*r.entry, collSuccess, "");
    r.entry.reset();
  }
}

void Engine::inspectStalls(double nowS) {
  auto reports = stall_.check(negotiator_, nowS);
  if (!reports.empty()) {
    for (const auto& s : reports) COLL_WARN("%s", s.c_str());
    counters_.stallWarnings += reports.size();
    std::lock_guard<std::mutex> lk(mu_);
    stallReports_.insert(stallReports_.end(), reports.begin(), reports.end());
  }
  if (abortReason_.empty()) abortReason_ = stall_.shutdownReason(negotiator_, nowS);
}

}  // namespace coll::engine
