// Execution helpers shared by the algorithms: posting transfers on links, driving
// progress in the calling thread, and waiting politely (spin, then yield/sleep) with the
// communicator's deadline and failure checks.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "algorithms/team.hpp"
#include "base/reduce.hpp"
#include "base/wait.hpp"
#include "transport/transport.hpp"

namespace coll {

// A short list that lives inside its owner up to N entries and moves to the heap only
// beyond: most operations talk to one or two peers, and a Progress is made per call, so
// a heap allocation here would show in the small-message latency.
template <typename T, size_t N>
class SmallList {
 public:
  void push_back(const T& v) {
    if (n_ < N) {
      inline_[n_++] = v;
      return;
    }
    if (heap_.empty()) heap_.assign(inline_, inline_ + N);
    heap_.push_back(v);
    ++n_;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const T* begin() const { return n_ <= N ? inline_ : heap_.data(); }
  const T* end() const { return begin() + n_; }
  const T& operator[](size_t i) const { return begin()[i]; }

 private:
  T inline_[N];
  std::vector<T> heap_;
  size_t n_ = 0;
};

// Whether a final output of `bytes` in all is written past the cache (Xfer::cold): only
// one too large to stay there anyway, as for reduction results (base/reduce.hpp). Smaller
// ones are read again from the cache by whoever comes next; streaming 8-64 KiB outputs of
// broadcast, gather and scatter (2 ranks) took 1.1-2x the time.
inline bool coldOutput(size_t bytes) { return bytes >= streamMinBytes(); }

class Progress {
 public:
  Progress(Team& comm, const char* what);

  // mirror, coldMirror: see Xfer::mirror and Xfer::cold; only on links that copy it
  // (linkCopiesMirror).
  void send(int peer, const void* buf, size_t bytes, Xfer* x, void* mirror = nullptr, bool coldMirror = false);
  // A send the receiver reduces as it arrives, see Xfer::intoReduction.
  void sendToReduction(int peer, const void* buf, size_t bytes, Xfer* x);
  bool linkCopiesMirror(int peer) const;
  // assist, cold: see Xfer.
  void recv(int peer, void* buf, size_t bytes, Xfer* x, bool assist = false, bool cold = false);
  // A receive that lands as buf = reduce(with, incoming); only where
  // linkReducesOnReceive said yes for that data, see Xfer::with.
  void recvReduce(int peer, void* buf, const void* with, size_t bytes, collDataType_t dt,
                  collRedOp_t op, Xfer* x);
  bool linkReducesOnReceive(int peer, const void* with, size_t bytes) const;
  // One progress pass over every link this operation has used; true if anything moved.
  bool poll();
  // Progresses until done() holds.
  template <typename Pred>
  void waitUntil(Pred done) {
    while (!done()) step();
  }
  // One poll, and a back-off when it moved nothing.
  void step() {
    if (poll()) backoff_.reset();
    else idle();
  }
  void waitAll(Xfer* const* xs, size_t n);
  // For hand-written progress loops: report a pass that did / did not do anything.
  void idle();
  void progressed() { backoff_.reset(); }

 private:
  void touch(int peer);
  // The fields every send has, then the post; x is already reset, with its options set.
  void postSend(int peer, const void* buf, size_t bytes, Xfer* x);
  void checkHealth();
  bool sharesCpuWithAwaitedPeer();

  Team& comm_;
  const char* what_;
  uint64_t call_;  // stamped on every transfer (Xfer::call)
  // The operation's deadline starts at its first health check, not at construction: a
  // clock read costs about as much as a whole small operation between two cores, and
  // most small operations finish before their first check (after 256 idle polls, a few
  // microseconds, which the deadline then misses out of COLL_TIMEOUT seconds).
  std::optional<Deadline> deadline_;
  Backoff backoff_;
  bool avoidSharedCpu_;
  SmallList<Link*, 8> links_;
  SmallList<int, 8> touchedPeers_;
  std::vector<pollfd> pollFds_;
};

// Geometry of n blocks over a buffer: block i has cnt(i) elements at offset off(i).
struct Blocks {
  size_t base = 0;   // elements per block before the remainder is spread
  size_t extra = 0;  // the first `extra` blocks get one more element
  // `count` elements split as evenly as possible into n blocks.
  static Blocks split(size_t count, int n) { return {count / n, count % n}; }
  // n blocks of exactly `count` elements each.
  static Blocks equal(size_t count) { return {count, 0}; }
  size_t cnt(int i) const { return base + (static_cast<size_t>(i) < extra ? 1 : 0); }
  size_t off(int i) const { return static_cast<size_t>(i) * base + (static_cast<size_t>(i) < extra ? i : extra); }
};

inline int modRank(long v, int n) { return static_cast<int>(((v % n) + n) % n); }

}  // namespace coll
