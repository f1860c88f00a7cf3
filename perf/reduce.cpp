// reduce_perf: collReduce of count = bytes / type size elements to -r root (only the
// root's output is checked); busbw = algbw (perf::busBwFactor).
#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  return collReduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, a.stream);
}
collResult_t icall(const perf::CallArgs& a, collRequest_t* r, int* n) {
  *n = 1;
  return collIreduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, r);
}
}  // namespace

int main(int argc, char** argv) { return perf::runTool(argc, argv, {perf::Coll::Reduce, call, nullptr, nullptr, icall}); }
