#include "algorithms/ring_task.hpp"

#include <algorithm>

#include "algorithms/ring_stream.hpp"
#include "base/reduce.hpp"
#include "base/types.hpp"

namespace coll {

RingTask::RingTask(Team& comm, Progress& pg, RingTaskSpec spec) : pg_(pg), s_(std::move(spec)) {
  n_ = static_cast<int>(s_.members.size());
  es_ = typeSize(s_.dt);
  next_ = s_.members[(s_.pos + 1) % n_];
  prev_ = s_.members[(s_.pos + n_ - 1) % n_];
  chunkElems_ = std::max<size_t>(1, pipelineChunkBytes(comm) / es_);
  depth_ = static_cast<size_t>(pipelineDepth(comm));
  sendX_.resize(depth_);
  recvX_.resize(depth_);
  if (n_ < 2) s_.steps = 0;
  for (int t = 0; t < s_.steps; ++t) {
    totalSends_ += chunks(sendBlock(t));
    totalRecvs_ += chunks(recvBlock(t));
  }
  firstStepChunks_ = s_.steps > 0 ? chunks(sendBlock(0)) : 0;
  if (s_.reduceSteps > 0 && totalRecvs_ > 0)
    slots_ = static_cast<char*>(comm.scratch(depth_ * chunkElems_ * es_, s_.scratchSlot));
  skipEmpty(sendCur_, true);
  skipEmpty(recvCur_, false);
  skipEmpty(doneCur_, false);
}

int RingTask::sendBlock(int t) const { return modRank(static_cast<long>(s_.base) - t, n_); }
int RingTask::recvBlock(int t) const { return modRank(static_cast<long>(s_.base) - t - 1, n_); }
size_t RingTask::chunks(int block) const { return (s_.blocks.cnt(block) + chunkElems_ - 1) / chunkElems_; }
size_t RingTask::chunkLen(int block, size_t k) const {
  return std::min(chunkElems_, s_.blocks.cnt(block) - k * chunkElems_);
}
char* RingTask::blockDst(int block, size_t k) const {
  return s_.dst + (s_.blocks.off(block) + k * chunkElems_) * es_;
}

// Moves a cursor that points past the chunks of its step on to the next non-empty step.
void RingTask::skipEmpty(Cursor& c, bool sendSide) const {
  while (c.t < s_.steps && c.k >= chunks(sendSide ? sendBlock(c.t) : recvBlock(c.t))) {
    ++c.t;
    c.k = 0;
  }
}

bool RingTask::postRecvs() {
  bool acted = false;
  while (recvsPosted_ < totalRecvs_ && recvsPosted_ - recvsDone_ < depth_) {
    int b = recvBlock(recvCur_.t);
    size_t slot = recvsPosted_ % depth_;
    char* into = recvCur_.t < s_.reduceSteps ? slots_ + slot * chunkElems_ * es_ : blockDst(b, recvCur_.k);
    pg_.recv(prev_, into, chunkLen(b, recvCur_.k) * es_, &recvX_[slot]);
    ++recvsPosted_;
    ++recvCur_.k;
    skipEmpty(recvCur_, false);
    acted = true;
  }
  return acted;
}

bool RingTask::postSends() {
  bool acted = false;
  while (sendsPosted_ < totalSends_ && sendsPosted_ - sendsDone_ < depth_) {
    // After step 0, send i forwards what receive i - firstStepChunks_ delivered.
    if (sendCur_.t > 0 && recvsDone_ + firstStepChunks_ <= sendsPosted_) break;
    int b = sendBlock(sendCur_.t);
    const char* from = sendCur_.t == 0 ? s_.firstSrc + sendCur_.k * chunkElems_ * es_ : blockDst(b, sendCur_.k);
    pg_.send(next_, from, chunkLen(b, sendCur_.k) * es_, &sendX_[sendsPosted_ % depth_]);
    ++sendsPosted_;
    ++sendCur_.k;
    skipEmpty(sendCur_, true);
    acted = true;
  }
  return acted;
}

// Receives finish strictly in order, so a staging slot is reused only after its chunk
// has been reduced.
bool RingTask::finishRecvs() {
  bool acted = false;
  while (recvsDone_ < recvsPosted_ && recvX_[recvsDone_ % depth_].complete) {
    if (doneCur_.t < s_.reduceSteps) {
      int b = recvBlock(doneCur_.t);
      size_t len = chunkLen(b, doneCur_.k);
      size_t at = (s_.blocks.off(b) + doneCur_.k * chunkElems_) * es_;
      char* out = blockDst(b, doneCur_.k);
      reduceBuffers(out, s_.local + at, slots_ + (recvsDone_ % depth_) * chunkElems_ * es_, len, s_.dt, s_.op);
      if (s_.avgDivisor > 0 && doneCur_.t == s_.reduceSteps - 1) finishAverage(out, len, s_.dt, s_.avgDivisor);
    }
    ++recvsDone_;
    ++doneCur_.k;
    skipEmpty(doneCur_, false);
    acted = true;
  }
  return acted;
}

bool RingTask::finishSends() {
  bool acted = false;
  while (sendsDone_ < sendsPosted_ && sendX_[sendsDone_ % depth_].complete) {
    ++sendsDone_;
    acted = true;
  }
  return acted;
}

bool RingTask::pump() {
  bool acted = postRecvs();
  acted |= postSends();
  acted |= finishRecvs();
  acted |= finishSends();
  if (acted) acted |= postSends();  // a finished receive may release the next send
  return acted;
}

}  // namespace coll
