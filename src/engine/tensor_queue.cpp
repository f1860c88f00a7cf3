#include "engine/tensor_queue.hpp"

#include "base/error.hpp"

namespace coll::engine {

void TensorQueue::checkLocked(const Entry& e, const std::unordered_set<std::string>& batch) const {
  if (closed_) COLL_THROW(closedCode_, "tensor '", e.meta.name, "' rejected: ", closedReason_);
  if (names_.count(e.meta.name) || batch.count(e.meta.name))
    COLL_THROW(collInvalidUsage, "tensor '", e.meta.name, "' is already in flight on rank ", rank_,
               ": a name can be reused only after its previous operation completed");
}

void TensorQueue::push(EntryPtr e) {
  std::lock_guard<std::mutex> lk(mu_);
  checkLocked(*e, {});
  names_.insert(e->meta.name);
  e->submitted = Clock::now();
  queue_.push_back(std::move(e));
}

void TensorQueue::pushAll(std::vector<EntryPtr> entries) {
  std::lock_guard<std::mutex> lk(mu_);
  std::unordered_set<std::string> batch;
  for (const auto& e : entries) {
    checkLocked(*e, batch);
    batch.insert(e->meta.name);
  }
  auto now = Clock::now();
  for (auto& e : entries) {
    names_.insert(e->meta.name);
    e->submitted = now;
    queue_.push_back(std::move(e));
  }
}

std::vector<EntryPtr> TensorQueue::drain() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<EntryPtr> out;
  out.swap(queue_);
  return out;
}

void TensorQueue::release(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  names_.erase(name);
}

std::vector<EntryPtr> TensorQueue::close(collResult_t code, const std::string& reason) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!closed_) {
    closed_ = true;
    closedCode_ = code;
    closedReason_ = reason;
  }
  std::vector<EntryPtr> out;
  out.swap(queue_);
  return out;
}

size_t TensorQueue::inFlight() const {
  std::lock_guard<std::mutex> lk(mu_);
  return names_.size();
}

}  // namespace coll::engine
