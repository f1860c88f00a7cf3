// The hand-off from caller threads to the engine thread. It also owns the set of names in
// flight, so a duplicate submission fails at once, in the caller's thread.
#pragma once

#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/entry.hpp"

namespace coll::engine {

class TensorQueue {
 public:
  explicit TensorQueue(int rank) : rank_(rank) {}
  // Throws collInvalidUsage for a name already in flight, or once the queue is closed.
  void push(EntryPtr e);
  void pushAll(std::vector<EntryPtr> entries);  // all or none
  std::vector<EntryPtr> drain();
  // The entry's name may be used again (called just before its handle completes).
  void release(const std::string& name);
  // Rejects every later push with `reason`; returns what was still queued.
  std::vector<EntryPtr> close(collResult_t code, const std::string& reason);
  size_t inFlight() const;

 private:
  void checkLocked(const Entry& e, const std::unordered_set<std::string>& batch) const;
  int rank_;
  mutable std::mutex mu_;
  std::vector<EntryPtr> queue_;
  std::unordered_set<std::string> names_;
  bool closed_ = false;
  collResult_t closedCode_ = collSuccess;
  std::string closedReason_;
};

}  // namespace coll::engine
