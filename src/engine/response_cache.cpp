#include "engine/response_cache.hpp"

namespace coll::engine {

ResponseCache::Lookup ResponseCache::lookup(const RequestMeta& local) const {
  auto it = byName_.find(local.name);
  if (it == byName_.end()) return {};
  const Slot& s = *slots_[it->second];
  return {s.expected == local ? Kind::Hit : Kind::Mismatch, it->second};
}

void ResponseCache::insert(const Response& r) {
  if (!cacheable(r) || byName_.count(r.name())) return;
  if (byName_.size() >= capacity_) return;
  uint32_t slot = 0;
  while (slot < slots_.size() && slots_[slot]) ++slot;
  if (slot == slots_.size()) slots_.emplace_back();
  slots_[slot] = Slot{r, expectedLocalMeta(r, myRank_)};
  byName_[r.name()] = slot;
}

void ResponseCache::erase(uint32_t slot) {
  if (!occupied(slot)) return;
  byName_.erase(slots_[slot]->response.name());
  slots_[slot].reset();
  // Trailing free slots are dropped so the control vector shrinks; every rank does the
  // same, so the agreed slot count stays identical.
  while (!slots_.empty() && !slots_.back()) slots_.pop_back();
}

std::optional<uint32_t> ResponseCache::slotOf(const std::string& name) const {
  auto it = byName_.find(name);
  if (it == byName_.end()) return std::nullopt;
  return it->second;
}

}  // namespace coll::engine
