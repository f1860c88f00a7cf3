// What the InfiniBand backend's endpoints moved and how: messages and bytes eager
// (through the bounce slots) and zero-copy (RDMA writes), and the bytes the CPU copied.
// For COLL_DEBUG=TRACE and for the tests and the model that assert "no copies above the
// cut-over".
#pragma once

#include <cstdint>
#include <mutex>

#include "transport/net/ib/reg_cache.hpp"

namespace coll::net::ib {

struct ByteCounts {
  uint64_t eagerMsgs = 0, zcopyMsgs = 0;
  uint64_t eagerBytes = 0;   // payload of eager messages (a receive: the true size)
  uint64_t zcopyBytes = 0;   // payload written by RDMA
  uint64_t copiedBytes = 0;  // payload the CPU copied into (send) or out of (receive) slots
  ByteCounts& operator+=(const ByteCounts& o) {
    eagerMsgs += o.eagerMsgs;
    zcopyMsgs += o.zcopyMsgs;
    eagerBytes += o.eagerBytes;
    zcopyBytes += o.zcopyBytes;
    copiedBytes += o.copiedBytes;
    return *this;
  }
};

// Every endpoint of one backend context adds its messages here as they complete.
class CounterTotals {
 public:
  void add(bool send, const ByteCounts& d) {
    std::lock_guard<std::mutex> lock(mu_);
    (send ? sent_ : received_) += d;
  }
  ByteCounts sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  ByteCounts received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  mutable std::mutex mu_;
  ByteCounts sent_, received_;
};

// The counts of one endpoint (a send or receive endpoint of the backend), of every
// endpoint made from a backend context, and the registration cache of one of its
// devices. Throw collInvalidArgument for an object that is not one.
ByteCounts endpointCounts(void* comm);
ByteCounts contextSent(void* context);
ByteCounts contextReceived(void* context);
CacheStats contextCacheStats(void* context, int dev);

}  // namespace coll::net::ib
