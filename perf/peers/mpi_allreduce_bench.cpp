// The MPI peer of the *_perf tools: the same size sweep, float data, the same counts
// (perf::countsFor), timing rule (per-iteration average, max over ranks), data check and
// table, so that the two can be compared size by size. --coll picks MPI_Allreduce
// (default), MPI_Allgather, MPI_Bcast, MPI_Reduce_scatter_block, MPI_Reduce,
// MPI_Alltoall, MPI_Gather or MPI_Scatter; the rest are the *_perf tools' flags (-r
// names the root of the rooted calls; -r all is refused).
//   mpirun -np 2 mpi_allreduce_bench -b 8 -e 64M -f 4 [--coll allgather]
// Only the C API is used; skip the deprecated C++ bindings and their warnings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check.hpp"
#include "common.hpp"
#include "peer_report.hpp"

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, FreeDeleter>;

Buffer allocBuffer(size_t bytes) {
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  return Buffer(static_cast<char*>(std::aligned_alloc(4096, rounded ? rounded : 4096)));
}

struct Bench {
  perf::Coll coll = perf::Coll::AllReduce;
  const char* mpiName = "MPI_Allreduce";
  perf::Options opts;
  int rank = 0, nranks = 1;
  int root = 0;  // -r, for the rooted calls
  Buffer send, recv;

  void call(const perf::Counts& k) {
    int count = static_cast<int>(k.paramCount);
    const MPI_Comm w = MPI_COMM_WORLD;
    switch (coll) {
      case perf::Coll::AllGather:
        MPI_Allgather(send.get(), count, MPI_FLOAT, recv.get(), count, MPI_FLOAT, w);
        break;
      case perf::Coll::Broadcast:
        MPI_Bcast(recv.get(), count, MPI_FLOAT, root, w);
        break;
      case perf::Coll::ReduceScatter:
        MPI_Reduce_scatter_block(send.get(), recv.get(), count, MPI_FLOAT, MPI_SUM, w);
        break;
      case perf::Coll::Reduce:
        MPI_Reduce(send.get(), recv.get(), count, MPI_FLOAT, MPI_SUM, root, w);
        break;
      // count is per peer (perf::countsFor), as MPI's send and receive counts are.
      case perf::Coll::AllToAll:
        MPI_Alltoall(send.get(), count, MPI_FLOAT, recv.get(), count, MPI_FLOAT, w);
        break;
      case perf::Coll::Gather:
        MPI_Gather(send.get(), count, MPI_FLOAT, recv.get(), count, MPI_FLOAT, root, w);
        break;
      case perf::Coll::Scatter:
        MPI_Scatter(send.get(), count, MPI_FLOAT, recv.get(), count, MPI_FLOAT, root, w);
        break;
      default:
        MPI_Allreduce(send.get(), recv.get(), count, MPI_FLOAT, MPI_SUM, w);
    }
  }

  void prepare(const perf::Counts& k, const perf::Pattern& p) {
    perf::fillInput(send.get(), k.sendCount, p, rank);
    std::memset(recv.get(), 0xFF, k.recvCount * sizeof(float));
    // MPI_Bcast works in one buffer: the root's input goes there.
    if (coll == perf::Coll::Broadcast && rank == root)
      std::memcpy(recv.get(), send.get(), k.sendCount * sizeof(float));
  }

  long long runSize(size_t bytes) {
    perf::Counts k = perf::countsFor(coll, bytes, sizeof(float), nranks, rank);
    perf::Pattern p(collFloat, perf::collHasOp(coll) ? collSum : perf::kNoOp, nranks);
    perf::IterCount ic = perf::itersForSize(opts, bytes);
    prepare(k, p);
    for (int i = 0; i < ic.warmup; ++i) call(k);
    MPI_Barrier(MPI_COMM_WORLD);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < ic.iters; ++i) call(k);
    std::chrono::duration<double, std::micro> el = std::chrono::steady_clock::now() - start;
    double us = el.count() / ic.iters;
    MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long long wrong = -1;
    if (opts.check) {
      prepare(k, p);
      call(k);
      // Reduce and gather: only the root's output is defined (and checked).
      wrong = static_cast<long long>(perf::countWrong(coll, p, k, nranks, rank, root, recv.get()));
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    }
    if (rank == 0) {
      // As the *_perf tools: size is the larger buffer, count the count of the call (per
      // rank or per peer for the split collectives).
      perf::printPeerRow(k.printedCount() * sizeof(float), k.paramCount, "float",
                         perf::collHasOp(coll) ? "sum" : "none",
                         perf::collHasRoot(coll) ? root : -1, us,
                         perf::busBwFactor(coll, nranks), wrong);
    }
    return wrong;
  }
};

// Takes --coll out of args; the rest is all_reduce_perf's flags.
bool pickCollective(std::vector<std::string>& args, Bench& b, std::string* err) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] != "--coll") continue;
    std::string v = i + 1 < args.size() ? args[i + 1] : "";
    if (v == "allreduce") b.coll = perf::Coll::AllReduce, b.mpiName = "MPI_Allreduce";
    else if (v == "allgather") b.coll = perf::Coll::AllGather, b.mpiName = "MPI_Allgather";
    else if (v == "bcast") b.coll = perf::Coll::Broadcast, b.mpiName = "MPI_Bcast";
    else if (v == "reducescatter")
      b.coll = perf::Coll::ReduceScatter, b.mpiName = "MPI_Reduce_scatter_block";
    else if (v == "reduce") b.coll = perf::Coll::Reduce, b.mpiName = "MPI_Reduce";
    else if (v == "alltoall") b.coll = perf::Coll::AllToAll, b.mpiName = "MPI_Alltoall";
    else if (v == "gather") b.coll = perf::Coll::Gather, b.mpiName = "MPI_Gather";
    else if (v == "scatter") b.coll = perf::Coll::Scatter, b.mpiName = "MPI_Scatter";
    else {
      *err = "invalid value '" + v +
             "' for --coll (allreduce allgather bcast reducescatter reduce alltoall gather"
             " scatter)";
      return false;
    }
    args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
    return true;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Bench b;
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string err;
  try {
    if (!pickCollective(args, b, &err)) throw perf::UsageError(err);
    b.opts = perf::parseArgs(args);
    // One root per run, and a rank of this job (every rank refuses alike).
    if (b.opts.allRoots) throw perf::UsageError("-r all: one root per run here");
    if (b.opts.root >= b.nranks) {
      throw perf::UsageError("-r " + std::to_string(b.opts.root) + " is not a rank of " +
                             std::to_string(b.nranks));
    }
    b.root = b.opts.root;
  } catch (const perf::UsageError& e) {
    if (b.rank == 0) std::fprintf(stderr, "mpi_allreduce_bench: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }
  if (b.opts.maxBytes / sizeof(float) > static_cast<size_t>(1) << 30) {
    if (b.rank == 0)
      std::fprintf(stderr, "mpi_allreduce_bench: -e above 4G needs MPI large counts\n");
    MPI_Finalize();
    return 2;
  }
  b.send = allocBuffer(b.opts.maxBytes);
  b.recv = allocBuffer(b.opts.maxBytes);
  if (!b.send || !b.recv) {
    std::fprintf(stderr, "mpi_allreduce_bench: cannot allocate 2 x %zu bytes\n", b.opts.maxBytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (b.rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string first(version, strnlen(version, static_cast<size_t>(len)));
    first = first.substr(0, first.find_first_of(",\n"));
    std::printf("# mpi_allreduce_bench: %s float%s, nranks %d, %s\n", b.mpiName,
                perf::collHasOp(b.coll) ? " sum" : "", b.nranks, first.c_str());
    perf::printPeerTableHeader();
  }
  long long wrongTotal = 0;
  for (size_t bytes : perf::sizeList(b.opts)) wrongTotal += std::max(0LL, b.runSize(bytes));
  if (b.rank == 0)
    std::printf("# Out of bounds values : %lld %s\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
  MPI_Finalize();
  return wrongTotal ? 1 : 0;
}
