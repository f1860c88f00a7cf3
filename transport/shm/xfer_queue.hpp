// FIFO of posted transfers. A circular buffer that only grows (doubling), so steady-state
// posting and completing never allocates — std::deque would allocate and free a block
// whenever the window crosses a block boundary, which is on the latency path.
#pragma once

#include <cstddef>
#include <vector>

#include "transport/transport.hpp"

namespace coll::shm {

class XferQueue {
 public:
  XferQueue() : slots_(64) {}
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  Xfer* front() const { return slots_[first_]; }
  void push(Xfer* x) {
    if (size_ == slots_.size()) grow();
    slots_[(first_ + size_) & (slots_.size() - 1)] = x;
    ++size_;
  }
  Xfer* pop() {
    Xfer* x = slots_[first_];
    first_ = (first_ + 1) & (slots_.size() - 1);
    --size_;
    return x;
  }

 private:
  void grow() {
    std::vector<Xfer*> bigger(slots_.size() * 2);
    for (size_t i = 0; i < size_; ++i) bigger[i] = slots_[(first_ + i) & (slots_.size() - 1)];
    slots_.swap(bigger);
    first_ = 0;
  }
  std::vector<Xfer*> slots_;  // size is a power of two
  size_t first_ = 0;
  size_t size_ = 0;
};

}  // namespace coll::shm
