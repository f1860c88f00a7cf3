// The host collectives that keep the ranks of the CUDA IPC path in step (they run on the
// communicator, in its issue order, with its timeout). The transport defines what it
// needs of them; the device algorithms (algorithms/device) provide them over the
// communicator.
#pragma once

#include <cstddef>

namespace coll::cuda {

class HostCollectives {
 public:
  virtual ~HostCollectives() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // Every rank's `bytes` bytes at mine, gathered in rank order into all.
  virtual void allGather(const void* mine, void* all, size_t bytes) = 0;
  // Every rank says whether it is fine; returns the lowest rank that is not, or -1. Also
  // a barrier: no rank returns before every rank has called it.
  virtual int firstFailedRank(bool ok) = 0;
};

}  // namespace coll::cuda
