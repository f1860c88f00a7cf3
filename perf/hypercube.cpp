// hypercube_perf: an all-gather by recursive doubling, built from grouped
// collSend/collRecv calls as in nccl-tests. Each rank holds count = bytes / (n * type
// size) elements; at step k (k = 0 .. log2(n)-1) it exchanges everything it holds so far,
// the 2^k blocks of its aligned group, with rank ^ 2^k, so that after log2(n) steps every
// rank holds every rank's block at offset rank * count. Size is the gathered buffer,
// busbw = algbw * (n-1)/n (perf::busBwFactor). Needs a power-of-two rank count
// (perf::rankCountProblem), host buffers and -m 1 (perf::optionsProblem).
#include "runner.hpp"

namespace {

// One step: send the 2^k blocks held, receive the partner's 2^k. At step 0 the block
// held is the send buffer itself, and the copy of it into its place in the receive
// buffer (a send to itself, skipped in place) joins the group: a send reads its buffer
// as it is when the group starts, so step 0 cannot send from the receive buffer.
collResult_t step(const perf::CallArgs& a, int mask) {
  const size_t blockBytes = a.count * perf::typeBytes(a.type);
  char* recv = static_cast<char*>(a.recv);
  const size_t mine = static_cast<size_t>(a.rank & ~(mask - 1));  // first block held
  const size_t theirs = mine ^ static_cast<size_t>(mask);         // first block received
  const size_t blocks = static_cast<size_t>(mask);
  const bool inPlace = a.send == recv + static_cast<size_t>(a.rank) * blockBytes;
  collResult_t r = collGroupStart();
  if (r != collSuccess) return r;
  collResult_t s = collSuccess;
  if (mask == 1 && !inPlace) {
    s = collSend(a.send, a.count, a.type, a.rank, a.comm, nullptr);
    if (s == collSuccess)
      s = collRecv(recv + static_cast<size_t>(a.rank) * blockBytes, a.count, a.type, a.rank,
                   a.comm, nullptr);
  }
  if (mask < a.nranks) {
    const int peer = a.rank ^ mask;
    const void* from = mask == 1 ? a.send : recv + mine * blockBytes;
    if (s == collSuccess) s = collSend(from, a.count * blocks, a.type, peer, a.comm, nullptr);
    if (s == collSuccess)
      s = collRecv(recv + theirs * blockBytes, a.count * blocks, a.type, peer, a.comm, nullptr);
  }
  // The group must be closed even after a failed call, or the next call nests in it.
  r = collGroupEnd();
  return s != collSuccess ? s : r;
}

collResult_t call(const perf::CallArgs& a) {
  // mask 1 always runs: on one rank it is only the copy into place.
  for (int mask = 1; mask == 1 || mask < a.nranks; mask <<= 1) {
    collResult_t r = step(a, mask);
    if (r != collSuccess) return r;
  }
  return collSuccess;
}

}  // namespace

int main(int argc, char** argv) { return perf::runTool(argc, argv, {perf::Coll::HyperCube, call}); }
