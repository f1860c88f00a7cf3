// The data collectives the engine issues, as a small interface. The library's
// implementation forwards to the public C API on one communicator; tests can run the
// whole engine on an in-process fake. Every call is blocking and throws coll::Error.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "collective.h"

namespace coll::engine {

// A nonblocking collective in flight. Destruction waits for it (its buffers must outlive it).
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual void wait() = 0;  // throws coll::Error
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void allreduce(const void* send, void* recv, size_t count, collDataType_t dt,
                         collRedOp_t op) = 0;
  // recv holds size() * count elements; rank r's part at r * count.
  virtual void allgather(const void* send, void* recv, size_t count, collDataType_t dt) = 0;
  virtual void broadcast(const void* send, void* recv, size_t count, collDataType_t dt,
                         int root) = 0;
  virtual void alltoall(const void* send, void* recv, size_t count, collDataType_t dt) = 0;
  virtual void reduceScatter(const void* send, void* recv, size_t recvCount, collDataType_t dt,
                             collRedOp_t op) = 0;
  // Variable all-to-all in bytes: sendCounts[r] bytes at sendDispls[r] go to rank r.
  virtual void alltoallv(const void* send, const std::vector<size_t>& sendCounts,
                         const std::vector<size_t>& sendDispls, void* recv,
                         const std::vector<size_t>& recvCounts,
                         const std::vector<size_t>& recvDispls) = 0;
  // Nonblocking all-reduce / all-to-all / all-gather (same semantics as the blocking calls). Calls on
  // one group execute in issue order, blocking and nonblocking alike, so every rank must
  // issue them in the same order.
  virtual std::unique_ptr<PendingOp> iallreduce(const void* send, void* recv, size_t count,
                                                collDataType_t dt, collRedOp_t op) = 0;
  virtual std::unique_ptr<PendingOp> ialltoall(const void* send, void* recv, size_t count,
                                               collDataType_t dt) = 0;
  virtual std::unique_ptr<PendingOp> iallgather(const void* send, void* recv, size_t count,
                                                collDataType_t dt) = 0;
  virtual void barrier() = 0;
  // Collective: ranks with the same color form a new group ordered by key.
  // Returns nullptr for COLL_SPLIT_NOCOLOR.
  virtual std::unique_ptr<Collectives> split(int color, int key) = 0;
};

// Forwards to the C API. Owns comm (collCommDestroy at destruction) when owned.
std::unique_ptr<Collectives> makeCommCollectives(collComm_t comm, bool owned);

}  // namespace coll::engine
