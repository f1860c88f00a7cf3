// A pipelined ring over any group of ranks, driven step by step so that several of them
// (on disjoint sets of links) can run at once inside one operation: the hierarchical
// algorithms overlap an intra-host ring with an inter-host one this way.
//
// The schedule is the classic one: at step t the member at ring position p sends block
// (base - t) to position p + 1 and receives block (base - t - 1) from p - 1; the first
// reduceSteps steps combine what arrives with the member's own contribution. Chunk k of
// step t leaves as soon as chunk k of step t - 1 has arrived, so the steps overlap.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/exec.hpp"
#include "collective.h"

namespace coll {

struct RingTaskSpec {
  std::vector<int> members;  // ranks in ring order
  int pos = 0;               // this rank's index in members
  int base = 0;              // block sent at step 0
  int steps = 0;
  int reduceSteps = 0;
  Blocks blocks;             // geometry of members.size() blocks, in elements
  collDataType_t dt = collFloat32;
  collRedOp_t op = collSum;
  const char* firstSrc = nullptr;  // data of block `base` for step 0
  const char* local = nullptr;     // own contribution, indexed by block offset
  char* dst = nullptr;             // block results, indexed by block offset
  int avgDivisor = 0;              // > 0: divide by it after the last reduction
  int scratchSlot = 3;             // Comm::scratch slot for staging received chunks
};

class RingTask {
 public:
  RingTask(Team& comm, Progress& pg, RingTaskSpec spec);
  // Posts what may be posted and finishes what has arrived; true if anything happened.
  // Does not poll the links (the caller's loop does, once for all tasks).
  bool pump();
  bool done() const { return sendsDone_ == totalSends_ && recvsDone_ == totalRecvs_; }
  // Every send and receive has been posted (some may still be in flight). A later task on
  // the same links may start posting from here on: both ends then see all of this task's
  // messages before any of the next one's, so matching by order still holds.
  bool allPosted() const { return sendsPosted_ == totalSends_ && recvsPosted_ == totalRecvs_; }

 private:
  struct Cursor {
    int t = 0;
    size_t k = 0;
  };
  int sendBlock(int t) const;
  int recvBlock(int t) const;
  size_t chunks(int block) const;
  size_t chunkLen(int block, size_t k) const;
  void skipEmpty(Cursor& c, bool sendSide) const;
  char* blockDst(int block, size_t k) const;
  bool postRecvs();
  bool postSends();
  bool finishRecvs();
  bool finishSends();

  Progress& pg_;
  RingTaskSpec s_;
  int n_ = 1;
  size_t es_ = 1;
  int next_ = -1, prev_ = -1;
  size_t chunkElems_ = 1, depth_ = 1;
  char* slots_ = nullptr;
  std::vector<Xfer> sendX_, recvX_;
  size_t totalSends_ = 0, totalRecvs_ = 0, firstStepChunks_ = 0;
  size_t sendsPosted_ = 0, sendsDone_ = 0, recvsPosted_ = 0, recvsDone_ = 0;
  Cursor sendCur_, recvCur_, doneCur_;
};

}  // namespace coll
