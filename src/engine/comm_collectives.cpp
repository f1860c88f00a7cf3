// Collectives over a libcollective communicator (the public C API only).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/error.hpp"
#include "base/types.hpp"
#include "engine/collectives.hpp"

namespace coll::engine {
namespace {

class CommPending final : public PendingOp {
 public:
  CommPending(collRequest_t req, collComm_t comm) : req_(req), comm_(comm) {}
  ~CommPending() override {
    if (req_) collWait(&req_);  // unwinding: the result was or will be reported elsewhere
  }
  void wait() override {
    if (!req_) return;
    collResult_t res = collWait(&req_);
    req_ = nullptr;
    if (res != collSuccess)
      COLL_THROW(res, "nonblocking collective failed: ", collGetErrorString(res), ": ",
                 collGetLastError(comm_));
  }

 private:
  collRequest_t req_;
  collComm_t comm_;
};

class CommCollectives final : public Collectives {
 public:
  CommCollectives(collComm_t comm, bool owned) : comm_(comm), owned_(owned) {
    check(collCommUserRank(comm_, &rank_), "collCommUserRank");
    check(collCommCount(comm_, &size_), "collCommCount");
  }
  ~CommCollectives() override {
    if (owned_ && comm_) collCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce(const void* s, void* r, size_t n, collDataType_t dt, collRedOp_t op) override {
    check(collAllReduce(s, r, n, dt, op, comm_, nullptr), "collAllReduce");
  }
  void allgather(const void* s, void* r, size_t n, collDataType_t dt) override {
    check(collAllGather(s, r, n, dt, comm_, nullptr), "collAllGather");
  }
  void broadcast(const void* s, void* r, size_t n, collDataType_t dt, int root) override {
    check(collBroadcast(s, r, n, dt, root, comm_, nullptr), "collBroadcast");
  }
  void alltoall(const void* s, void* r, size_t n, collDataType_t dt) override {
    check(collAllToAll(s, r, n, dt, comm_, nullptr), "collAllToAll");
  }
  void reduceScatter(const void* s, void* r, size_t n, collDataType_t dt, collRedOp_t op) override {
    check(collReduceScatter(s, r, n, dt, op, comm_, nullptr), "collReduceScatter");
  }
  void alltoallv(const void* send, const std::vector<size_t>& sc, const std::vector<size_t>& sd,
                 void* recv, const std::vector<size_t>& rc, const std::vector<size_t>& rd) override;
  std::unique_ptr<PendingOp> iallreduce(const void* s, void* r, size_t n, collDataType_t dt,
                                        collRedOp_t op) override {
    collRequest_t req = nullptr;
    check(collIallReduce(s, r, n, dt, op, comm_, &req), "collIallReduce");
    return std::make_unique<CommPending>(req, comm_);
  }
  std::unique_ptr<PendingOp> ialltoall(const void* s, void* r, size_t n, collDataType_t dt) override {
    collRequest_t req = nullptr;
    check(collIallToAll(s, r, n, dt, comm_, &req), "collIallToAll");
    return std::make_unique<CommPending>(req, comm_);
  }
  std::unique_ptr<PendingOp> iallgather(const void* s, void* r, size_t n, collDataType_t dt) override {
    collRequest_t req = nullptr;
    check(collIallGather(s, r, n, dt, comm_, &req), "collIallGather");
    return std::make_unique<CommPending>(req, comm_);
  }
  void barrier() override { check(collBarrier(comm_), "collBarrier"); }
  std::unique_ptr<Collectives> split(int color, int key) override {
    collComm_t nc = nullptr;
    check(collCommSplit(comm_, color, key, &nc), "collCommSplit");
    if (!nc) return nullptr;
    return std::make_unique<CommCollectives>(nc, true);
  }

 private:
  void check(collResult_t res, const char* what) const {
    if (res != collSuccess)
      COLL_THROW(res, what, " failed: ", collGetErrorString(res), ": ", collGetLastError(comm_));
  }
  collComm_t comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
};

// Point-to-point in one group so that every pair's send and receive are matched without
// ordering constraints; empty parts are skipped.
void CommCollectives::alltoallv(const void* send, const std::vector<size_t>& sc,
                                const std::vector<size_t>& sd, void* recv,
                                const std::vector<size_t>& rc, const std::vector<size_t>& rd) {
  const auto* s = static_cast<const uint8_t*>(send);
  auto* r = static_cast<uint8_t*>(recv);
  if (sc[rank_] > 0) std::memmove(r + rd[rank_], s + sd[rank_], sc[rank_]);
  check(collGroupStart(), "collGroupStart");
  collResult_t first = collSuccess;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    if (sc[p] > 0 && first == collSuccess)
      first = collSend(s + sd[p], sc[p], collUint8, p, comm_, nullptr);
    if (rc[p] > 0 && first == collSuccess)
      first = collRecv(r + rd[p], rc[p], collUint8, p, comm_, nullptr);
  }
  collResult_t end = collGroupEnd();
  check(first, "collSend/collRecv");
  check(end, "collGroupEnd");
}

}  // namespace

std::unique_ptr<Collectives> makeCommCollectives(collComm_t comm, bool owned) {
  COLL_CHECK_ARG(comm != nullptr, "communicator is null");
  return std::make_unique<CommCollectives>(comm, owned);
}

}  // namespace coll::engine
