// The response cache: decisions that repeat step after step (the same gradients every
// iteration) get a slot number. Every rank inserts and erases in the same order (driven by
// identical responses and identical control vectors), so slot numbers agree everywhere
// and a round only needs one small min-allreduce over per-slot states instead of the
// full negotiation.
//
// Pure logic: no communication.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/request.hpp"

namespace coll::engine {

class ResponseCache {
 public:
  ResponseCache(size_t capacity, int myRank) : capacity_(capacity), myRank_(myRank) {}

  enum class Kind { Miss, Hit, Mismatch };
  struct Lookup {
    Kind kind = Kind::Miss;
    uint32_t slot = 0;
  };
  // Hit: the name is cached with exactly this request. Mismatch: cached with different
  // parameters (the slot must be invalidated on every rank).
  Lookup lookup(const RequestMeta& local) const;

  // Adds a cacheable response in the lowest free slot; no-op when full or already present.
  void insert(const Response& r);
  void erase(uint32_t slot);
  // Slot count every rank agrees on: one past the highest slot ever in use.
  size_t slotCount() const { return slots_.size(); }
  bool occupied(uint32_t slot) const { return slot < slots_.size() && slots_[slot].has_value(); }
  const Response& response(uint32_t slot) const { return slots_.at(slot)->response; }
  size_t size() const { return byName_.size(); }
  std::optional<uint32_t> slotOf(const std::string& name) const;

 private:
  struct Slot {
    Response response;
    RequestMeta expected;  // what this rank submits when it repeats the request
  };
  size_t capacity_;
  int myRank_;
  std::vector<std::optional<Slot>> slots_;
  std::unordered_map<std::string, uint32_t> byName_;
};

}  // namespace coll::engine
