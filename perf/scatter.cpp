// scatter_perf: the root sends block r (count = bytes / (n * type size) elements at
// offset r * count of its send buffer) to rank r, its own block through a send to itself
// in the same group; built from grouped collSend/collRecv calls as nccl-tests builds it
// (it times that pattern, not the library's collScatter). Size is the root's send buffer, busbw = algbw * (n-1)/n
// (perf::busBwFactor); every rank's output is checked. Host buffers only
// (perf::optionsProblem).
#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  collResult_t r = collGroupStart();
  if (r != collSuccess) return r;
  collResult_t s = collSuccess;
  if (a.rank == a.root) {
    const size_t blockBytes = a.count * perf::typeBytes(a.type);
    for (int peer = 0; peer < a.nranks && s == collSuccess; ++peer) {
      s = collSend(static_cast<const char*>(a.send) + static_cast<size_t>(peer) * blockBytes,
                   a.count, a.type, peer, a.comm, nullptr);
    }
  }
  if (s == collSuccess) s = collRecv(a.recv, a.count, a.type, a.root, a.comm, nullptr);
  // The group must be closed even after a failed call, or the next call nests in it.
  r = collGroupEnd();
  return s != collSuccess ? s : r;
}
}  // namespace

int main(int argc, char** argv) { return perf::runTool(argc, argv, {perf::Coll::Scatter, call}); }
