// collective::Communicator: RAII C++ API over the C ABI (header-only).
//
//   collUniqueId id = collective::newUniqueId();          // on one rank, then share it
//   collective::Communicator comm(id, rank, size);        // or Communicator::fromEnv()
//   std::vector<float> grad(n);
//   comm.allReduce(std::span(grad), collective::Op::Avg); // in place
//   auto req = comm.iallGather(mine, std::span(all));  // input: span, vector or array
//   ...; req.wait();
//
// The data type comes from the span's element type (see types.hpp). Spans are checked
// against each other and the communicator size here; everything else is checked by the
// library. Every failure throws collective::Error. Buffers are host memory.
#pragma once

#if !defined(__cplusplus) || __cplusplus <= 201703L
#error "<collective/communicator.hpp> needs C++20 (-std=c++20); C and older C++ can use <collective.h>"
#endif

#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "collective.h"
#include "collective/error.hpp"
#include "collective/request.hpp"
#include "collective/types.hpp"

namespace collective {

// Input buffers of two-buffer calls: T is deduced from the output span alone, so the
// input may be a span of T or const T, a vector or an array.
template <typename T>
using In = std::span<const std::type_identity_t<T>>;

inline collUniqueId newUniqueId() {
  collUniqueId id;
  detail::check(collGetUniqueId(&id), "collGetUniqueId");
  return id;
}

// Defers the collectives issued on this thread until end() or the end of the scope
// (collGroupStart/collGroupEnd), so that matching sends and receives cannot deadlock.
class Group {
 public:
  Group() { detail::check(collGroupStart(), "collGroupStart"); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  // The destructor cannot report errors: call end() to see them.
  ~Group() {
    if (open_) (void)collGroupEnd();
  }
  void end() {
    if (!open_) return;
    open_ = false;
    detail::check(collGroupEnd(), "collGroupEnd");
  }

 private:
  bool open_ = true;
};

class Communicator {
 public:
  static constexpr int kNoColor = COLL_SPLIT_NOCOLOR;

  // Collective over all `size` ranks, each passing its own rank and the same id.
  Communicator(const collUniqueId& id, int rank, int size) {
    detail::check(collCommInitRank(&comm_, size, id, rank), "collCommInitRank");
    rank_ = rank;
    size_ = size;
  }

  // Rank, size and rendezvous from collectiverun, mpirun or Slurm.
  static Communicator fromEnv() {
    collComm_t c = nullptr;
    detail::check(collCommInitFromEnv(&c), "collCommInitFromEnv");
    return adopt(c);
  }

  // Takes ownership of a handle made through the C API.
  static Communicator adopt(collComm_t comm) {
    Communicator result;
    result.comm_ = comm;  // owned from here on, so destroyed even if the queries throw
    detail::check(collCommUserRank(comm, &result.rank_), "collCommUserRank", comm);
    detail::check(collCommCount(comm, &result.size_), "collCommCount", comm);
    return result;
  }

  Communicator(Communicator&& other) noexcept { swap(other); }
  Communicator& operator=(Communicator&& other) noexcept {
    Communicator tmp(std::move(other));
    swap(tmp);
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() {
    if (comm_) (void)collCommDestroy(comm_);
  }

  // Destroys now, reporting failure (the destructor cannot).
  void destroy() {
    if (!comm_) return;
    detail::check(collCommDestroy(std::exchange(comm_, nullptr)), "collCommDestroy");
  }
  // Stops pending work, wakes every waiter with an error and frees the communicator.
  void abort() noexcept {
    if (comm_) (void)collCommAbort(std::exchange(comm_, nullptr));
  }

  // Collective: ranks with the same color form a new communicator ordered by key, then
  // by rank. Returns nothing for color == kNoColor.
  std::optional<Communicator> split(int color, int key) const {
    collComm_t out = nullptr;
    check(collCommSplit(comm_, color, key, &out), "collCommSplit");
    if (!out) return std::nullopt;
    return adopt(out);
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  collComm_t get() const noexcept { return comm_; }
  explicit operator bool() const noexcept { return comm_ != nullptr; }

  // The first error seen by the communicator's background work (collSuccess if none).
  collResult_t asyncError() const {
    collResult_t e = collSuccess;
    check(collCommGetAsyncError(comm_, &e), "collCommGetAsyncError");
    return e;
  }

  // ---- blocking collectives ----

  template <Element T>
  void allReduce(In<T> send, std::span<T> recv, Op op = Op::Sum) {
    sameSize("allReduce", send.size(), recv.size());
    check(collAllReduce(send.data(), recv.data(), send.size(), dataTypeOf<T>, toC(op), comm_,
                        nullptr), "collAllReduce");
  }
  template <Element T>
  void allReduce(std::span<T> buf, Op op = Op::Sum) {
    allReduce(In<T>(buf), buf, op);
  }

  // send is read on the root only; the other ranks may pass an empty span.
  template <Element T>
  void broadcast(In<T> send, std::span<T> recv, int root) {
    if (rank_ == root) sameSize("broadcast", send.size(), recv.size());
    check(collBroadcast(send.data(), recv.data(), recv.size(), dataTypeOf<T>, root, comm_,
                        nullptr), "collBroadcast");
  }
  template <Element T>
  void broadcast(std::span<T> buf, int root) {
    broadcast(In<T>(buf), buf, root);
  }

  // recv is written on the root only; the other ranks may pass an empty span.
  template <Element T>
  void reduce(In<T> send, std::span<T> recv, int root, Op op = Op::Sum) {
    if (rank_ == root) sameSize("reduce", send.size(), recv.size());
    check(collReduce(send.data(), recv.data(), send.size(), dataTypeOf<T>, toC(op), root,
                     comm_, nullptr), "collReduce");
  }

  // recv holds size() * send.size() elements, rank r's part at r * send.size().
  template <Element T>
  void allGather(In<T> send, std::span<T> recv) {
    gatherSizes("allGather", send.size(), recv.size(), "recv");
    check(collAllGather(send.data(), recv.data(), send.size(), dataTypeOf<T>, comm_, nullptr),
          "collAllGather");
  }

  // send holds size() * recv.size() elements; this rank gets the reduced part rank().
  template <Element T>
  void reduceScatter(In<T> send, std::span<T> recv, Op op = Op::Sum) {
    gatherSizes("reduceScatter", recv.size(), send.size(), "send");
    check(collReduceScatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>, toC(op),
                            comm_, nullptr), "collReduceScatter");
  }

  // On the root, recv holds size() * send.size() elements, rank r's part at
  // r * send.size(); the other ranks may pass an empty recv.
  template <Element T>
  void gather(In<T> send, std::span<T> recv, int root) {
    if (rank_ == root) gatherSizes("gather", send.size(), recv.size(), "recv");
    check(collGather(send.data(), recv.data(), send.size(), dataTypeOf<T>, root, comm_, nullptr),
          "collGather");
  }

  // On the root, send holds size() * recv.size() elements; this rank gets part rank().
  // The other ranks may pass an empty send.
  template <Element T>
  void scatter(In<T> send, std::span<T> recv, int root) {
    if (rank_ == root) gatherSizes("scatter", recv.size(), send.size(), "send");
    check(collScatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>, root, comm_, nullptr),
          "collScatter");
  }

  // Both spans hold size() blocks of equal length; block r goes to (comes from) rank r.
  template <Element T>
  void allToAll(In<T> send, std::span<T> recv) {
    check(collAllToAll(send.data(), recv.data(), blockOf("allToAll", send.size(), recv.size()),
                       dataTypeOf<T>, comm_, nullptr), "collAllToAll");
  }

  template <Element T>
  void send(std::span<T> buf, int peer) {
    check(collSend(buf.data(), buf.size(), dataTypeOf<T>, peer, comm_, nullptr), "collSend");
  }
  template <Element T>
  void recv(std::span<T> buf, int peer) {
    check(collRecv(buf.data(), buf.size(), dataTypeOf<T>, peer, comm_, nullptr), "collRecv");
  }

  void barrier() { check(collBarrier(comm_), "collBarrier"); }

  // ---- nonblocking collectives: same arguments, a Request to wait on ----

  template <Element T>
  [[nodiscard]] Request iallReduce(In<T> send, std::span<T> recv, Op op = Op::Sum) {
    sameSize("iallReduce", send.size(), recv.size());
    return start("collIallReduce", [&](collRequest_t* r) {
      return collIallReduce(send.data(), recv.data(), send.size(), dataTypeOf<T>, toC(op), comm_,
                            r);
    });
  }
  template <Element T>
  [[nodiscard]] Request iallReduce(std::span<T> buf, Op op = Op::Sum) {
    return iallReduce(In<T>(buf), buf, op);
  }
  template <Element T>
  [[nodiscard]] Request ibroadcast(std::span<T> buf, int root) {
    return start("collIbroadcast", [&](collRequest_t* r) {
      return collIbroadcast(buf.data(), buf.data(), buf.size(), dataTypeOf<T>, root, comm_, r);
    });
  }
  template <Element T>
  [[nodiscard]] Request ireduce(In<T> send, std::span<T> recv, int root, Op op = Op::Sum) {
    if (rank_ == root) sameSize("ireduce", send.size(), recv.size());
    return start("collIreduce", [&](collRequest_t* r) {
      return collIreduce(send.data(), recv.data(), send.size(), dataTypeOf<T>, toC(op), root,
                         comm_, r);
    });
  }
  template <Element T>
  [[nodiscard]] Request iallGather(In<T> send, std::span<T> recv) {
    gatherSizes("iallGather", send.size(), recv.size(), "recv");
    return start("collIallGather", [&](collRequest_t* r) {
      return collIallGather(send.data(), recv.data(), send.size(), dataTypeOf<T>, comm_, r);
    });
  }
  template <Element T>
  [[nodiscard]] Request ireduceScatter(In<T> send, std::span<T> recv, Op op = Op::Sum) {
    gatherSizes("ireduceScatter", recv.size(), send.size(), "send");
    return start("collIreduceScatter", [&](collRequest_t* r) {
      return collIreduceScatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>, toC(op),
                                comm_, r);
    });
  }
  template <Element T>
  [[nodiscard]] Request igather(In<T> send, std::span<T> recv, int root) {
    if (rank_ == root) gatherSizes("igather", send.size(), recv.size(), "recv");
    return start("collIgather", [&](collRequest_t* r) {
      return collIgather(send.data(), recv.data(), send.size(), dataTypeOf<T>, root, comm_, r);
    });
  }
  template <Element T>
  [[nodiscard]] Request iscatter(In<T> send, std::span<T> recv, int root) {
    if (rank_ == root) gatherSizes("iscatter", recv.size(), send.size(), "send");
    return start("collIscatter", [&](collRequest_t* r) {
      return collIscatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>, root, comm_, r);
    });
  }
  template <Element T>
  [[nodiscard]] Request iallToAll(In<T> send, std::span<T> recv) {
    const size_t block = blockOf("iallToAll", send.size(), recv.size());
    return start("collIallToAll", [&](collRequest_t* r) {
      return collIallToAll(send.data(), recv.data(), block, dataTypeOf<T>, comm_, r);
    });
  }
  template <Element T>
  [[nodiscard]] Request isend(std::span<T> buf, int peer) {
    return start("collIsend", [&](collRequest_t* r) {
      return collIsend(buf.data(), buf.size(), dataTypeOf<T>, peer, comm_, r);
    });
  }
  template <Element T>
  [[nodiscard]] Request irecv(std::span<T> buf, int peer) {
    return start("collIrecv", [&](collRequest_t* r) {
      return collIrecv(buf.data(), buf.size(), dataTypeOf<T>, peer, comm_, r);
    });
  }
  [[nodiscard]] Request ibarrier() {
    return start("collIbarrier", [&](collRequest_t* r) { return collIbarrier(comm_, r); });
  }

 private:
  Communicator() = default;

  void swap(Communicator& o) noexcept {
    std::swap(comm_, o.comm_);
    std::swap(rank_, o.rank_);
    std::swap(size_, o.size_);
  }

  void check(collResult_t rc, const char* call) const { detail::check(rc, call, comm_); }

  template <typename Call>
  Request start(const char* call, Call&& c) {
    collRequest_t r = nullptr;
    check(c(&r), call);
    return Request(r, comm_);
  }

  static void sameSize(const char* call, size_t send, size_t recv) {
    if (send != recv)
      detail::invalidArgument(call, "send has " + std::to_string(send) + " elements but recv has " +
                                        std::to_string(recv));
  }
  // whole == size() * part, as for allGather's recv and reduceScatter's send (gather's
  // and scatter's on the root).
  void gatherSizes(const char* call, size_t part, size_t whole, const char* wholeName) const {
    if (whole != part * static_cast<size_t>(size_))
      detail::invalidArgument(call, std::string(wholeName) + " has " + std::to_string(whole) +
                                        " elements, expected size() x " + std::to_string(part) +
                                        " = " + std::to_string(size_) + " x " +
                                        std::to_string(part));
  }
  size_t blockOf(const char* call, size_t send, size_t recv) const {
    sameSize(call, send, recv);
    if (size_ <= 0 || send % static_cast<size_t>(size_) != 0)
      detail::invalidArgument(call, "send and recv have " + std::to_string(send) +
                                        " elements, which do not split into " +
                                        std::to_string(size_) + " equal blocks");
    return send / static_cast<size_t>(size_);
  }

  collComm_t comm_ = nullptr;
  int rank_ = -1;
  int size_ = 0;
};

// A pre-multiplied sum on one communicator (collRedOpCreatePreMulSum): every rank's input
// times that rank's own scalar, then summed. It converts to Op, for calls on spans of T:
//   collective::PreMulSum scaled(comm, 1.0f / comm.size());  // PreMulSum<float>
//   comm.allReduce(std::span(grad), scaled);
// The op is destroyed with the object; calls issued before keep the scalar they were
// issued with. Destroy it before its communicator (the destructor of an op whose
// communicator is gone does nothing harmful, but reports nothing either).
template <Element T>
class PreMulSum {
 public:
  PreMulSum(const Communicator& comm, T scalar) : comm_(comm.get()) {
    detail::check(collRedOpCreatePreMulSum(&op_, &scalar, dataTypeOf<T>, collScalarHostImmediate, comm_),
                  "collRedOpCreatePreMulSum", comm_);
  }
  PreMulSum(PreMulSum&& other) noexcept
      : comm_(std::exchange(other.comm_, nullptr)), op_(other.op_) {}
  PreMulSum& operator=(PreMulSum&& other) noexcept {
    PreMulSum tmp(std::move(other));
    std::swap(comm_, tmp.comm_);
    std::swap(op_, tmp.op_);
    return *this;
  }
  PreMulSum(const PreMulSum&) = delete;
  PreMulSum& operator=(const PreMulSum&) = delete;
  ~PreMulSum() {
    if (comm_) (void)collRedOpDestroy(op_, comm_);
  }

  // Destroys now, reporting failure (the destructor cannot).
  void destroy() {
    if (!comm_) return;
    collComm_t c = std::exchange(comm_, nullptr);
    detail::check(collRedOpDestroy(op_, c), "collRedOpDestroy", c);
  }

  Op op() const noexcept { return static_cast<Op>(op_); }
  operator Op() const noexcept { return op(); }
  explicit operator bool() const noexcept { return comm_ != nullptr; }

 private:
  collComm_t comm_ = nullptr;
  collRedOp_t op_ = collSum;
};

}  // namespace collective
