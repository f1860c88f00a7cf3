// all_reduce_perf: collAllReduce of count = bytes / type size elements;
// busbw = algbw * 2(n-1)/n (perf::busBwFactor).
#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  return collAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}
collResult_t icall(const perf::CallArgs& a, collRequest_t* r, int* n) {
  *n = 1;
  return collIallReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, r);
}
}  // namespace

int main(int argc, char** argv) { return perf::runTool(argc, argv, {perf::Coll::AllReduce, call, nullptr, nullptr, icall}); }
