// gather_perf: the root receives count = bytes / (n * type size) elements from every rank
// into its receive buffer at offset rank * count. By default it times nccl-tests' pattern,
// grouped collSend/collRecv calls (the root's own block through a send to itself in the
// same group), host buffers only (perf::optionsProblem); with --native 1 it times the
// library's collGather, on host or (-g 1) device buffers. Size is the gathered buffer,
// busbw = algbw * (n-1)/n (perf::busBwFactor); only the root's output is checked.
#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  collResult_t r = collGroupStart();
  if (r != collSuccess) return r;
  collResult_t s = collSend(a.send, a.count, a.type, a.root, a.comm, nullptr);
  if (a.rank == a.root) {
    const size_t blockBytes = a.count * perf::typeBytes(a.type);
    for (int peer = 0; peer < a.nranks && s == collSuccess; ++peer) {
      s = collRecv(static_cast<char*>(a.recv) + static_cast<size_t>(peer) * blockBytes, a.count,
                   a.type, peer, a.comm, nullptr);
    }
  }
  // The group must be closed even after a failed call, or the next call nests in it.
  r = collGroupEnd();
  return s != collSuccess ? s : r;
}

collResult_t native(const perf::CallArgs& a) {
  return collGather(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}
// --native 1 with -z 0 or 3.
collResult_t inative(const perf::CallArgs& a, collRequest_t* r, int* n) {
  *n = 1;
  return collIgather(a.send, a.recv, a.count, a.type, a.root, a.comm, r);
}
}  // namespace

int main(int argc, char** argv) {
  return perf::runTool(argc, argv, {perf::Coll::Gather, call, native, "collGather", nullptr, inative});
}
