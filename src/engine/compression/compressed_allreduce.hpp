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

// Called with a range [lo, hi) of the fused buffer.
using RangeFn = std::function<void(size_t lo, size_t hi)>;

// buf holds this rank's n floats (prescaled, residual already added) once stageIn(lo, hi)
// returned for a range; stageIn runs chunk by chunk just before the chunk is encoded, so
// staging overlaps earlier chunks' transfers. Afterwards buf holds the decoded sum over
// ranks, handed to stageOut(lo, hi) chunk by chunk as it arrives, and every non-null
// residual holds what this rank still owes.
// chunkElems: pipeline granularity (rounded to whole quantization blocks per rank).
void denseCompressedAllreduce(Collectives& c, const DenseCodec& codec, float* buf, size_t n,
                              const std::vector<CompressedSpan>& spans, FusionBuffers& bufs,
                              Rng& rng, size_t chunkElems, const RangeFn& stageIn = {},
                              const RangeFn& stageOut = {});

// One tensor of a top-k allreduce. input == nullptr: this rank joined (sends zeros).
struct TopkTensor {
  const float* input = nullptr;
  float* output = nullptr;  // may equal input
  size_t count = 0;
  float* residual = nullptr;  // error feedback state, or null
};

// output = outScale * sum over ranks of topk(prescale * input + residual).
void topkAllreduce(Collectives& c, double density, float prescale, float outScale,
                   const std::vector<TopkTensor>& tensors, FusionBuffers& bufs, Rng& rng);

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
