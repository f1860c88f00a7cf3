// The frontend's few direct uses of the C API (SyncBatchNorm, metrics, broadcasts),
// with failures turned into coll::Error carrying the communicator's last-error text.
#pragma once

#include <span>

#include "collective.h"

namespace collective::frontend {

void collCheck(collResult_t result, collComm_t comm, const char* what);

int commRank(collComm_t comm);
int commSize(collComm_t comm);

// Blocking helpers over host buffers.
void allReduceSum(std::span<double> values, collComm_t comm);
void allReduceSum(std::span<float> values, collComm_t comm);
void allGather(std::span<const double> mine, std::span<double> all, collComm_t comm);
void broadcast(std::span<float> values, int root, collComm_t comm);

// A communicator owned by the caller (collCommDestroy on scope exit).
class OwnedComm {
 public:
  OwnedComm() = default;
  explicit OwnedComm(collComm_t comm) : comm_(comm) {}
  ~OwnedComm();
  OwnedComm(OwnedComm&& o) noexcept : comm_(o.comm_) { o.comm_ = nullptr; }
  OwnedComm& operator=(OwnedComm&& o) noexcept;
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  collComm_t get() const { return comm_; }

  // A duplicate of `parent` (same ranks) for traffic that must not interleave with
  // the parent's, such as SyncBatchNorm running while the engine reduces gradients.
  static OwnedComm duplicate(collComm_t parent);

 private:
  collComm_t comm_ = nullptr;
};

}  // namespace collective::frontend
