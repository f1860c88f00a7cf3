// Allreduce in compressed form.
//
// Dense codecs (fp16, bf16, int8) never add in the compressed domain, so int8 cannot
// overflow and 16-bit sums lose no precision per hop: the reduce-scatter is an all-to-all
// of encoded shards, each rank decodes and accumulates its shard in float, re-encodes the
// sum and all-gathers it. The fused buffer is cut into chunks pipelined over nonblocking
// collectives, so encoding and decoding overlap the transfers.
//
// Top-k sends (index, value) pairs by all-gather and sums them locally; when the union of
// all ranks' pairs could cover the buffer (k * ranks >= n) a dense all-reduce of the
// sparsified tensors moves less and is used instead.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/collectives.hpp"
#include "engine/compression/codec.hpp"
#include "engine/compression/topk.hpp"
#include "engine/fusion_buffer.hpp"
#include "engine/request.hpp"

namespace coll::engine {

// One tensor inside the fused index space. residual is null without error feedback.
struct CompressedSpan {
  size_t offset = 0;
  size_t count = 0;
  float* residual = nullptr;
};

// Calls fn(j, from, to) for every span j overlapping [lo, hi) of the fused index space,
// [from, to) being the overlap. Spans are consecutive, in offset order.
template <typename F>
void forSpans(const std::vector<CompressedSpan>& spans, size_t lo, size_t hi, F&& fn) {
  auto it = std::partition_point(spans.begin(), spans.end(),
                                 [lo](const CompressedSpan& s) { return s.offset + s.count <= lo; });
  for (; it != spans.end() && it->offset < hi; ++it) {
    size_t from = std::max(lo, it->offset), to = std::min(hi, it->offset + it->count);
    if (from < to) fn(static_cast<size_t>(it - spans.begin()), from, to);
  }
}

// stageIn(lo, hi, dst) writes this rank's contribution to [lo, hi) of the fused index
// space (prescaled, residual added) to dst[0, hi - lo); stageOut(lo, hi, src) takes the
// decoded sum over ranks of that range from src[0, hi - lo).
using StageInFn = std::function<void(size_t lo, size_t hi, float* dst)>;
using StageOutFn = std::function<void(size_t lo, size_t hi, const float* src)>;

// The fused index space [0, n) is cut into chunks pipelined over nonblocking collectives
// and every chunk is processed in cache-sized pieces: a piece is staged, encoded and its
// residual updated while it is still in cache, so the gradients are read once and no
// fused float buffer is written. Afterwards every non-null residual holds what this rank
// still owes. chunkElems: pipeline granularity (rounded to whole quantization blocks per
// rank).
void denseCompressedAllreduce(Collectives& c, const DenseCodec& codec, size_t n,
                              const std::vector<CompressedSpan>& spans, FusionBuffers& bufs,
                              Rng& rng, size_t chunkElems, const StageInFn& stageIn,
                              const StageOutFn& stageOut);

// In place: buf holds this rank's n floats (residual already added) and receives the sum.
void denseCompressedAllreduce(Collectives& c, const DenseCodec& codec, float* buf, size_t n,
                              const std::vector<CompressedSpan>& spans, FusionBuffers& bufs,
                              Rng& rng, size_t chunkElems);

// One tensor of a top-k allreduce. input == nullptr: this rank joined (sends zeros).
struct TopkTensor {
  const float* input = nullptr;
  float* output = nullptr;  // may equal input
  size_t count = 0;
  float* residual = nullptr;  // error feedback state, or null
};

// output = outScale * sum over ranks of topk(prescale * input + residual). scratch (may
// be null) holds the selection's candidate lists; kept by the caller across calls, it is
// allocated once instead of every step.
void topkAllreduce(Collectives& c, double density, float prescale, float outScale,
                   const std::vector<TopkTensor>& tensors, FusionBuffers& bufs, Rng& rng,
                   std::vector<uint32_t>* scratch = nullptr);

// The sparse exchange behind topkAllreduce, in steps (exposed for tests).
class TopkExchange {
 public:
  TopkExchange(double density, const std::vector<CompressedSpan>& spans);
  // Selects span j's entries from x (its count values; null: zeros). With a residual, x
  // must be that residual, and the selected entries are cleared in it.
  void select(size_t j, const float* x, Rng& rng, std::vector<uint32_t>& scratch);
  // Error feedback in one pass: residual += gradient * scale, then select from the residual.
  void selectAccumulate(size_t j, const float* gradient, float scale, Rng& rng,
                        std::vector<uint32_t>& scratch);
  bool denseIsCheaper(size_t ranks) const;
  void scatterLocal(float* dense) const;  // dense[index] = value for this rank's pairs
  // The receive buffer of every rank's pairs (ranks x all pairs), from bufs.
  void prepare(Collectives& c, FusionBuffers& bufs);
  // Starts the all-gather of the pairs of spans [a, b), all selected already. Groups of
  // spans go out in order, each into its own part of the receive buffer.
  std::unique_ptr<PendingOp> startGroup(Collectives& c, size_t a, size_t b);
  // out = scale * sum over ranks of span j's pairs (zero elsewhere), once its group arrived.
  void accumulate(size_t j, float* out, float scale) const;
  size_t pairsOf(size_t a, size_t b) const { return first_[b] - first_[a]; }

 private:
  void take(size_t j, const float* x, const std::vector<uint32_t>& idx);
  const std::vector<CompressedSpan>& spans_;
  double density_;
  std::vector<size_t> first_;  // where span j's pairs start in this rank's selection
  size_t total_ = 0;
  std::vector<SparsePair> pairs_;  // capacity total_: started groups are never moved
  SparsePair* all_ = nullptr;
  size_t ranks_ = 1;
  std::vector<size_t> groupOf_;    // span -> first span of the group it was sent with
  std::vector<size_t> groupEnd_;   // span -> one past the last span of that group
};

}  // namespace coll::engine
