// The MPI peer of all_reduce_perf: the same size sweep, float data, the same timing rule
// (per-iteration average, max over ranks) and the same table, so that the two can be
// compared size by size. --coll picks MPI_Allreduce (default), MPI_Allgather, MPI_Bcast
// or MPI_Reduce_scatter_block; the rest are all_reduce_perf's flags.
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
  Buffer send, recv;

  void call(const perf::Counts& k) {
    int count = static_cast<int>(k.paramCount);
    switch (coll) {
      case perf::Coll::AllGather:
        MPI_Allgather(send.get(), count, MPI_FLOAT, recv.get(), count, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case perf::Coll::Broadcast:
        MPI_Bcast(recv.get(), count, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
      case perf::Coll::ReduceScatter:
        MPI_Reduce_scatter_block(send.get(), recv.get(), count, MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD);
        break;
      default:
        MPI_Allreduce(send.get(), recv.get(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
  }

  void prepare(const perf::Counts& k, const perf::Pattern& p) {
    perf::fillInput(send.get(), k.sendCount, p, rank);
    std::memset(recv.get(), 0xFF, k.recvCount * sizeof(float));
    // MPI_Bcast works in one buffer: the root's input goes there.
    if (coll == perf::Coll::Broadcast && rank == 0)
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
      wrong = static_cast<long long>(perf::countWrong(coll, p, k, nranks, rank, 0, recv.get()));
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    }
    if (rank == 0) {
      perf::printPeerRow(k.printedCount() * sizeof(float), k.printedCount(), "float",
                         perf::collHasOp(coll) ? "sum" : "none",
                         perf::collHasRoot(coll) ? 0 : -1, us,
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
    else {
      *err = "invalid value '" + v + "' for --coll (allreduce allgather bcast reducescatter)";
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
