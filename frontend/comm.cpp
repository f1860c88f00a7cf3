#include "comm.hpp"

#include "base/error.hpp"

namespace collective::frontend {

void collCheck(collResult_t result, collComm_t comm, const char* what) {
  if (result != collSuccess)
    COLL_THROW(result, what, " failed: ", collGetErrorString(result), ": ", collGetLastError(comm));
}

int commRank(collComm_t comm) {
  int rank = -1;
  collCheck(collCommUserRank(comm, &rank), comm, "collCommUserRank");
  return rank;
}

int commSize(collComm_t comm) {
  int size = 0;
  collCheck(collCommCount(comm, &size), comm, "collCommCount");
  return size;
}

void allReduceSum(std::span<double> values, collComm_t comm) {
  collCheck(collAllReduce(values.data(), values.data(), values.size(), collFloat64, collSum, comm,
                          nullptr),
            comm, "collAllReduce(float64)");
}

void allReduceSum(std::span<float> values, collComm_t comm) {
  collCheck(collAllReduce(values.data(), values.data(), values.size(), collFloat32, collSum, comm,
                          nullptr),
            comm, "collAllReduce(float32)");
}

void allGather(std::span<const double> mine, std::span<double> all, collComm_t comm) {
  COLL_CHECK_ARG(all.size() == mine.size() * static_cast<size_t>(commSize(comm)),
                 "allGather: receive span of ", all.size(), " elements for ", mine.size(),
                 " per rank");
  collCheck(collAllGather(mine.data(), all.data(), mine.size(), collFloat64, comm, nullptr), comm,
            "collAllGather(float64)");
}

void broadcast(std::span<float> values, int root, collComm_t comm) {
  collCheck(
      collBroadcast(values.data(), values.data(), values.size(), collFloat32, root, comm, nullptr),
      comm, "collBroadcast(float32)");
}

OwnedComm::~OwnedComm() {
  if (comm_) collCommDestroy(comm_);
}

OwnedComm& OwnedComm::operator=(OwnedComm&& o) noexcept {
  if (this != &o) {
    if (comm_) collCommDestroy(comm_);
    comm_ = o.comm_;
    o.comm_ = nullptr;
  }
  return *this;
}

OwnedComm OwnedComm::duplicate(collComm_t parent) {
  collComm_t dup = nullptr;
  collCheck(collCommSplit(parent, 0, commRank(parent), &dup), parent, "collCommSplit");
  return OwnedComm(dup);
}

}  // namespace collective::frontend
