// all_gather_perf: collAllGather; size is the gathered buffer, each rank sends
// bytes / (n * type size) elements; busbw = algbw * (n-1)/n (perf::busBwFactor).
#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  return collAllGather(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}
collResult_t icall(const perf::CallArgs& a, collRequest_t* r, int* n) {
  *n = 1;
  return collIallGather(a.send, a.recv, a.count, a.type, a.comm, r);
}
}  // namespace

int main(int argc, char** argv) { return perf::runTool(argc, argv, {perf::Coll::AllGather, call, nullptr, nullptr, icall}); }
