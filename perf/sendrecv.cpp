// sendrecv_perf: every rank sends count = bytes / type size elements to rank+1 and
// receives as many from rank-1 (a ring shift), grouped so the pair cannot deadlock;
// busbw = algbw (perf::busBwFactor).
#include "runner.hpp"

namespace {
collResult_t call(const perf::CallArgs& a) {
  int next = (a.rank + 1) % a.nranks;
  int prev = (a.rank - 1 + a.nranks) % a.nranks;
  if (a.stream) {
    // Device buffers (-g 1): ungrouped, so that each call runs alone (chunked, over CUDA
    // IPC where it can) instead of in a group, which is staged whole through host memory
    // (doc/cuda.md, "Groups"). Stream-ordered calls run in issue order,
    // so even ranks send first and odd ranks receive first: rank 0's send completes
    // (rank 1 receives first), and every other wait hangs off that chain, so no cycle.
    if (a.rank % 2 == 0) {
      collResult_t s = collSend(a.send, a.count, a.type, next, a.comm, a.stream);
      return s != collSuccess ? s : collRecv(a.recv, a.count, a.type, prev, a.comm, a.stream);
    }
    collResult_t v = collRecv(a.recv, a.count, a.type, prev, a.comm, a.stream);
    return v != collSuccess ? v : collSend(a.send, a.count, a.type, next, a.comm, a.stream);
  }
  collResult_t r = collGroupStart();
  if (r != collSuccess) return r;
  collResult_t s = collSend(a.send, a.count, a.type, next, a.comm, nullptr);
  collResult_t v = s == collSuccess ? collRecv(a.recv, a.count, a.type, prev, a.comm, nullptr)
                                    : s;
  // The group must be closed even after a failed call, or the next call nests in it.
  r = collGroupEnd();
  return v != collSuccess ? v : r;
}

// -z 0 and -z 3 on host buffers: collIsend and collIrecv. Operations on a communicator run
// in issue order, so the even ranks send first and the odd ranks receive first, as on
// the stream above. One rank sends to itself: that pair needs the group.
collResult_t icall(const perf::CallArgs& a, collRequest_t* r, int* n) {
  if (a.nranks == 1) {
    *n = 0;
    return call(a);
  }
  int next = (a.rank + 1) % a.nranks;
  int prev = (a.rank - 1 + a.nranks) % a.nranks;
  *n = 2;
  collResult_t s;
  if (a.rank % 2 == 0) {
    s = collIsend(a.send, a.count, a.type, next, a.comm, &r[0]);
    if (s == collSuccess) s = collIrecv(a.recv, a.count, a.type, prev, a.comm, &r[1]);
  } else {
    s = collIrecv(a.recv, a.count, a.type, prev, a.comm, &r[0]);
    if (s == collSuccess) s = collIsend(a.send, a.count, a.type, next, a.comm, &r[1]);
  }
  if (s != collSuccess) *n = r[0] ? 1 : 0;
  return s;
}
}  // namespace

int main(int argc, char** argv) {
  return perf::runTool(argc, argv, {perf::Coll::SendRecv, call, nullptr, nullptr, icall});
}
