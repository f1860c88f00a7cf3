// Each op runs in steps that fit the scratch (planIpc), and each step in phases:
//
//   all-reduce, reduce   copy in:  my chunk -> my scratch
//                        reduce:   my slice of every rank's chunk -> my gather slots
//                                  (copy engine), reduced in rank order 0..n-1 -> my out
//                        gather:   every rank's out -> my receive buffer (reduce: root only)
//   reduce-scatter       copy in:  my send's block of every rank -> my scratch slots
//                        reduce:   every rank's slot for me -> my gather slots, reduced in
//                                  rank order straight into my receive buffer
//   all-gather           copy in:  my send -> my scratch
//                        gather:   every rank's scratch -> its block of my receive buffer
//   broadcast            copy in:  the root's send -> its scratch
//                        gather:   the root's scratch -> my receive buffer
//
// A phase ends with a host all-reduce in which every rank says whether its part (copies
// and kernels, waited for) succeeded: it is the barrier that makes a peer's scratch safe
// to read (after "copy in", "reduce") and to overwrite (after the step's last phase, which
// also leaves nobody reading anyone's scratch once the op is done), and it makes every
// rank fail at the same point when one fails, instead of leaving the others waiting.
// Host barriers cost a few microseconds per phase; IPC events (cudaIpcGetEventHandle)
// waited on by the GPU would let the phases overlap the host, and are the next step.
//
// Every element of a result is computed by exactly one rank, in a fixed rank order, and
// the others copy those bits: all ranks get identical results.
#include "algorithms/device/ipc_collectives.hpp"

#include <cuda_runtime.h>

#include <exception>
#include <vector>

#include "base/error.hpp"
#include "cuda/kernels.hpp"
#include "cuda/runtime.hpp"
#include "transport/cuda_ipc/ipc_host.hpp"
#include "transport/cuda_ipc/ipc_peers.hpp"
#include "algorithms/device/ipc_plan.hpp"

namespace coll::cuda {
namespace {

class Runner {
 public:
  explicit Runner(const IpcRun& r)
      : r_(r),
        rank_(r.host.rank()),
        n_(r.host.nranks()),
        es_(r.spec.elemSize),
        plan_(planIpc(r.op.kind, r.op.count, r.spec.elemSize, r.host.nranks(), r.peers.bytes())),
        send_(static_cast<const char*>(r.spec.send)),
        recv_(static_cast<char*>(r.spec.recv)) {}

  void run() {
    switch (r_.op.kind) {
      case OpKind::AllReduce: reduceAll(true); break;
      case OpKind::Reduce: reduceAll(false); break;
      case OpKind::ReduceScatter: reduceScatter(); break;
      case OpKind::AllGather: allGather(); break;
      case OpKind::Broadcast: broadcast(); break;
      default: COLL_THROW(collInternalError, "CUDA IPC path given ", opKindName(r_.op.kind));
    }
  }

 private:
  size_t bytes(size_t elems) const { return elems * es_; }
  char* in(int r, size_t slot = 0) const { return r_.peers.scratch(r) + slot * plan_.inSlotBytes; }
  char* gather(int from) const {
    return r_.peers.scratch(rank_) + plan_.gatherOffset + static_cast<size_t>(from) * plan_.slotBytes;
  }
  char* out(int r) const { return r_.peers.scratch(r) + plan_.outOffset; }

  // Copy engine, any direction: a peer's mapped scratch, this device, another device.
  void copy(void* dst, const void* src, size_t n) const {
    if (n == 0 || dst == src) return;
    COLL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, static_cast<cudaStream_t>(r_.work.stream)));
  }

  // dst = srcs[0] op srcs[1] op ... in that order (then / n for avg).
  void reduceChain(void* dst, const std::vector<const void*>& srcs, size_t count) const {
    if (count == 0) return;
    if (srcs.size() == 1) {
      copy(dst, srcs[0], bytes(count));
    } else {
      reduce(dst, srcs[0], srcs[1], count, r_.op.dtype, r_.op.op, r_.work.stream);
      for (size_t i = 2; i < srcs.size(); ++i)
        reduce(dst, dst, srcs[i], count, r_.op.dtype, r_.op.op, r_.work.stream);
    }
    if (r_.op.op == collAvg) finishAverage(dst, count, r_.op.dtype, n_, r_.work.stream);
  }

  template <typename Body>
  void phase(const char* what, size_t step, Body&& body) {
    std::exception_ptr failure;
    try {
      body();
      r_.work.sync();
    } catch (...) {
      failure = std::current_exception();
    }
    int failed = -1;
    try {
      failed = r_.host.firstFailedRank(!failure);
    } catch (...) {
      if (!failure) throw;  // this rank's own error says more than the peers' silence
    }
    if (failure) std::rethrow_exception(failure);
    if (failed >= 0)
      COLL_THROW(collRemoteError, opKindName(r_.op.kind), " over CUDA IPC: rank ", failed, " failed in ",
                 what, " of step ", step, " (its error is on that rank)");
  }

  void reduceAll(bool everyone) {
    const bool gets = everyone || rank_ == r_.op.root;
    std::vector<const void*> srcs(static_cast<size_t>(n_));
    for (size_t s = 0; s < plan_.steps; ++s) {
      const ElemRange st = plan_.step(s, r_.op.count);
      const ElemRange mine = sliceOf(st.count, n_, rank_);
      phase("copy in", s, [&] { copy(in(rank_), send_ + bytes(st.offset), bytes(st.count)); });
      phase("reduce", s, [&] {
        if (mine.count == 0) return;
        for (int p = 0; p < n_; ++p) {
          const char* piece = in(p) + bytes(mine.offset);
          if (p != rank_) {
            copy(gather(p), piece, bytes(mine.count));
            piece = gather(p);
          }
          srcs[static_cast<size_t>(p)] = piece;
        }
        reduceChain(out(rank_), srcs, mine.count);
      });
      phase("gather", s, [&] {
        if (!gets) return;
        for (int p = 0; p < n_; ++p) {
          const ElemRange sl = sliceOf(st.count, n_, p);
          copy(recv_ + bytes(st.offset + sl.offset), out(p), bytes(sl.count));
        }
      });
    }
  }

  // In place (recv is my block of send) is safe: step s writes only the range of my
  // block that its own "copy in" has already read.
  void reduceScatter() {
    const size_t count = r_.op.count;
    std::vector<const void*> srcs(static_cast<size_t>(n_));
    for (size_t s = 0; s < plan_.steps; ++s) {
      const ElemRange st = plan_.step(s, count);
      phase("copy in", s, [&] {
        for (int p = 0; p < n_; ++p)
          copy(in(rank_, static_cast<size_t>(p)), send_ + bytes(static_cast<size_t>(p) * count + st.offset),
               bytes(st.count));
      });
      phase("reduce", s, [&] {
        for (int p = 0; p < n_; ++p) {
          const char* piece = in(p, static_cast<size_t>(rank_));
          if (p != rank_) {
            copy(gather(p), piece, bytes(st.count));
            piece = gather(p);
          }
          srcs[static_cast<size_t>(p)] = piece;
        }
        reduceChain(recv_ + bytes(st.offset), srcs, st.count);
      });
    }
  }

  // In place (send is my block of recv): my own block is already there.
  void allGather() {
    const size_t count = r_.op.count;
    for (size_t s = 0; s < plan_.steps; ++s) {
      const ElemRange st = plan_.step(s, count);
      phase("copy in", s, [&] { copy(in(rank_), send_ + bytes(st.offset), bytes(st.count)); });
      phase("gather", s, [&] {
        for (int p = 0; p < n_; ++p) {
          char* dst = recv_ + bytes(static_cast<size_t>(p) * count + st.offset);
          copy(dst, p == rank_ ? send_ + bytes(st.offset) : in(p), bytes(st.count));
        }
      });
    }
  }

  void broadcast() {
    const int root = r_.op.root;
    for (size_t s = 0; s < plan_.steps; ++s) {
      const ElemRange st = plan_.step(s, r_.op.count);
      phase("copy in", s, [&] {
        if (rank_ == root) copy(in(root), send_ + bytes(st.offset), bytes(st.count));
      });
      phase("gather", s, [&] {
        const char* src = rank_ == root ? send_ + bytes(st.offset) : in(root);
        copy(recv_ + bytes(st.offset), src, bytes(st.count));
      });
    }
  }

  const IpcRun& r_;
  const int rank_;
  const int n_;
  const size_t es_;
  const IpcPlan plan_;
  const char* send_;
  char* recv_;
};

}  // namespace

void runIpcCollective(const IpcRun& run) { Runner(run).run(); }

}  // namespace coll::cuda
