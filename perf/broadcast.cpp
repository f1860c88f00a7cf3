// broadcast_perf: collBroadcast of count = bytes / type size elements from -r root;
// busbw = algbw (perf::busBwFactor).
#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  return collBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}
}  // namespace

int main(int argc, char** argv) { return perf::runTool(argc, argv, {perf::Coll::Broadcast, call}); }
