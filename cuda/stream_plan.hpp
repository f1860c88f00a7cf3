// Pure planning for stream-ordered collectives on device buffers (no CUDA calls here, so
// it is unit-tested without a GPU): which bytes go through pinned host staging, where
// they sit in the staging block (in-place forms alias there as they do on the device),
// and how an element-wise operation is cut into pipelined chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace coll::cuda {

// One collective's buffers as the stream executor sees them.
struct StreamOpSpec {
  const void* send = nullptr;
  size_t sendBytes = 0;  // 0: the op reads nothing from send on this rank
  bool sendOnDevice = false;
  void* recv = nullptr;
  size_t recvBytes = 0;  // 0: the op writes nothing to recv on this rank
  bool recvOnDevice = false;
  size_t count = 0;  // elements, as the host collective takes them for the whole op
  size_t elemSize = 1;
  // The op may run as independent collectives over element ranges [off, off + n) of
  // send and recv alike (all-reduce, broadcast, reduce, send, recv), so it can be
  // pipelined: chunk i is on the network while chunk i+1 is copied in and chunk i-1 out.
  bool elementwise = false;
  int device = 0;  // owns the device buffers and the stream
};

// What the host collective gets for one chunk: host pointers (staging or the caller's own
// host memory; null where the op has no such side) and the chunk's element range.
struct HostView {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t offset = 0;  // first element of the chunk within the op
  size_t count = 0;
};

struct ChunkPlan {
  // count == kWhole: the whole op (every side entire, the spec's count).
  static constexpr size_t kWhole = SIZE_MAX;
  size_t offset = 0;  // elements
  size_t count = kWhole;
  bool whole() const { return count == kWhole; }
};

// Pieces of at most max(1, chunkBytes / elemSize) elements when element-wise and
// chunkBytes > 0 (one empty piece for count 0); otherwise one whole-op piece. Every rank
// must plan alike, so this depends only on its arguments.
std::vector<ChunkPlan> planChunks(size_t count, size_t elemSize, bool elementwise,
                                  size_t chunkBytes);

// Offsets of one part's send and recv sides in the staging block; kUser: that side is
// not staged (host memory or no bytes) and the host collective uses the caller's pointer.
struct StagingLayout {
  static constexpr size_t kUser = SIZE_MAX;
  size_t sendOffset = kUser;
  size_t recvOffset = kUser;
  bool sendStaged() const { return sendOffset != kUser; }
  bool recvStaged() const { return recvOffset != kUser; }
};

// Staging for a job of one or more parts (a group issues several ops as one job).
struct JobPlan {
  std::vector<StagingLayout> layouts;  // per part; offsets are into the whole block
  std::vector<ChunkPlan> chunks;       // one whole-op chunk unless a single element-wise part
  size_t stagingBytes = 0;
};

// Alignment of each region in the staging block (cudaMemcpy is fastest on aligned ends).
constexpr size_t kStagingAlign = 256;

// Checks the specs (collInvalidArgument naming the value) and lays them out. Device bytes
// that several sides touch are staged once, so the host collectives see the device's
// aliasing: within one op the same buffer (in place) or one side inside the other
// (in-place all-gather / reduce-scatter), and in a group a buffer that one op writes and
// a later one reads. Within one op a partial overlap is rejected.
JobPlan planJob(const std::vector<StreamOpSpec>& parts, size_t chunkBytes);

struct ByteRange {
  size_t offset = 0;
  size_t bytes = 0;
};
// The bytes of one side (sideBytes: spec.sendBytes or spec.recvBytes) that chunk c
// covers: its element range, or the whole side for a whole-op chunk.
ByteRange chunkRange(const StreamOpSpec& spec, const ChunkPlan& c, size_t sideBytes);

// The host collective's view of chunk c of a part whose staging block starts at staging.
HostView viewOf(const StreamOpSpec& spec, const StagingLayout& layout, const ChunkPlan& c,
                void* staging);

}  // namespace coll::cuda
