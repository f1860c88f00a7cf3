// alltoallv_perf: collAllToAllv with the per-peer counts and displacements of an even
// all-to-all (count elements to and from every peer, parts in rank order), so that its
// figures and data check are alltoall_perf's: the difference is the cost of the v-form.
#include <vector>

#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  thread_local std::vector<size_t> counts, displs;
  counts.assign(a.nranks, a.count);
  displs.resize(a.nranks);
  for (int p = 0; p < a.nranks; ++p) displs[p] = a.count * p;
  if (a.stream) return collInvalidArgument;  // host buffers only
  return collAllToAllv(a.send, counts.data(), displs.data(), a.recv, counts.data(), displs.data(), a.type, a.comm,
                       nullptr);
}
}  // namespace

int main(int argc, char** argv) { return perf::runTool(argc, argv, {perf::Coll::AllToAll, call}); }
