// reduce_scatter_perf: collReduceScatter; size is the send buffer, each rank receives
// bytes / (n * type size) elements; busbw = algbw * (n-1)/n (perf::busBwFactor).
#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  return collReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}
collResult_t icall(const perf::CallArgs& a, collRequest_t* r, int* n) {
  *n = 1;
  return collIreduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, r);
}
}  // namespace

int main(int argc, char** argv) {
  return perf::runTool(argc, argv, {perf::Coll::ReduceScatter, call, nullptr, nullptr, icall});
}
