// alltoall_perf: collAllToAll; size is one rank's whole buffer, count per peer is
// bytes / (n * type size); busbw = algbw * (n-1)/n (perf::busBwFactor).
#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  return collAllToAll(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}
collResult_t icall(const perf::CallArgs& a, collRequest_t* r, int* n) {
  *n = 1;
  return collIallToAll(a.send, a.recv, a.count, a.type, a.comm, r);
}
}  // namespace

int main(int argc, char** argv) { return perf::runTool(argc, argv, {perf::Coll::AllToAll, call, nullptr, nullptr, icall}); }
