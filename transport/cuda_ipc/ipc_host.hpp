// The host collectives that keep the ranks of the CUDA IPC path in step (they run on the
// communicator, in its issue order, with its timeout).
#pragma once

#include <cstddef>

namespace coll {
class Comm;
}

namespace coll::cuda {

// Every rank's `bytes` bytes at mine, gathered in rank order into all.
void hostAllGather(Comm& comm, const void* mine, void* all, size_t bytes);
// Every rank says whether it is fine; returns the lowest rank that is not, or -1. Also a
// barrier: no rank returns before every rank has called it.
int firstFailedRank(Comm& comm, bool ok);

}  // namespace coll::cuda
