// broadcast_perf: collBroadcast of count = bytes / type size elements from -r root;
// busbw = algbw (perf::busBwFactor).
#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  return collBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}
collResult_t icall(const perf::CallArgs& a, collRequest_t* r, int* n) {
  *n = 1;
  return collIbroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, r);
}
}  // namespace

int main(int argc, char** argv) { return perf::runTool(argc, argv, {perf::Coll::Broadcast, call, nullptr, nullptr, icall}); }
