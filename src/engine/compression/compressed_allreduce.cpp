#include "engine/compression/compressed_allreduce.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/error.hpp"
#include "engine/compression/topk.hpp"

namespace coll::engine {
namespace {

size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Elements per piece: staged values, their round trip and the encoded bytes of one piece
// (about 80 KiB) stay in the L2 cache through every pass over them.
constexpr size_t kPieceElems = 8192;

// One pipeline chunk of the fused index space: its shards, encoded sizes and buffers.
struct Chunk {
  size_t lo = 0, len = 0, shard = 0, enc = 0;
  uint8_t* send = nullptr;  // ranks * enc: encoded shards, then the all-gather target
  uint8_t* recv = nullptr;  // ranks * enc: the all-to-all target
  std::unique_ptr<PendingOp> a2a, ag;
  size_t shardLo(size_t r) const { return std::min(len, r * shard); }
  size_t shardLen(size_t r) const { return std::min(len, (r + 1) * shard) - shardLo(r); }
};

class DensePipeline {
 public:
  DensePipeline(Collectives& c, const DenseCodec& codec, size_t n, const std::vector<CompressedSpan>& spans,
                FusionBuffers& bufs, Rng& rng, size_t chunkElems, const StageInFn& stageIn,
                const StageOutFn& stageOut)
      : c_(c), codec_(codec), spans_(spans), rng_(rng), stageIn_(stageIn), stageOut_(stageOut),
        ranks_(static_cast<size_t>(c.size())), me_(static_cast<size_t>(c.rank())),
        piece_(roundUp(kPieceElems, codec.alignment())) {
    size_t step = codec.alignment() * ranks_;
    size_t chunk = std::max(step, roundUp(chunkElems, step));
    size_t total = 0, widest = 1;
    for (size_t lo = 0; lo < n; lo += chunk) {
      Chunk k;
      k.lo = lo;
      k.len = std::min(chunk, n - lo);
      k.shard = roundUp((k.len + ranks_ - 1) / ranks_, codec.alignment());
      // No shard holds more than the chunk's elements: buffers, pieces and the wire are
      // sized by that, not by a quantization block that may be far larger than the data.
      const size_t longest = std::min(k.shard, k.len);
      widest = std::max(widest, longest);
      // 64-byte aligned shards keep 16-bit views of encoded data aligned.
      k.enc = roundUp(codec.encodedBytes(longest), 64);
      total += ranks_ * k.enc;
      chunks_.push_back(std::move(k));
    }
    piece_ = std::min(piece_, widest);  // one piece per shard then: no block is cut
    auto* send = static_cast<uint8_t*>(bufs.get(BufferSlot::Send, total));
    auto* recv = static_cast<uint8_t*>(bufs.get(BufferSlot::Recv, total));
    for (auto& k : chunks_) {
      k.send = send;
      k.recv = recv;
      send += ranks_ * k.enc;
      recv += ranks_ * k.enc;
    }
    ef_ = std::any_of(spans.begin(), spans.end(), [](auto& s) { return s.residual; });
    x_ = static_cast<float*>(bufs.get(BufferSlot::Scratch, 2 * piece_ * sizeof(float)));
    rt_ = ef_ ? x_ + piece_ : nullptr;
  }

  // Chunk k+1 is encoded while chunk k's all-to-all is on the wire, and chunk k-1 is
  // decoded while chunk k's all-gather is. Every rank issues a2a(0), a2a(1), ag(0),
  // a2a(2), ag(1), ... in that order.
  void run() {
    if (chunks_.empty()) return;
    encodeAndSend(chunks_[0]);
    for (size_t k = 0; k < chunks_.size(); ++k) {
      if (k + 1 < chunks_.size()) encodeAndSend(chunks_[k + 1]);
      reduceAndGather(chunks_[k]);
      if (k > 0) receive(chunks_[k - 1]);
    }
    receive(chunks_.back());
  }

 private:
  // fn(at, m, encodedOffset) for the pieces of [lo, lo + len), a shard starting at lo.
  template <typename F>
  void forPieces(size_t lo, size_t len, F&& fn) const {
    for (size_t o = 0; o < len; o += piece_) fn(lo + o, std::min(piece_, len - o), codec_.encodedBytes(o));
  }

  // Error feedback for the piece [at, at + m) held in x_ with its round trip in rt_:
  // what was not sent is owed (set) or, for the re-encoded sum, owed in addition (add).
  void owe(size_t at, size_t m, bool add) const {
    if (!ef_) return;
    forSpans(spans_, at, at + m, [&](size_t j, size_t from, size_t to) {
      if (!spans_[j].residual) return;
      float* res = spans_[j].residual + (from - spans_[j].offset);
      const float* x = x_ + (from - at);
      const float* rt = rt_ + (from - at);
      const size_t m = to - from;
      // A NaN or infinity (in a gradient, or a sum that overflowed) is not owed: kept in
      // the residual it would make its block non-finite at every later step, and such a
      // block is sent as zeros, so the block would never be delivered again.
      if (add)
        for (size_t i = 0; i < m; ++i) {
          const float d = x[i] - rt[i];
          res[i] += std::fabs(d) <= FLT_MAX ? d : 0.0f;
        }
      else
        for (size_t i = 0; i < m; ++i) {
          const float d = x[i] - rt[i];
          res[i] = std::fabs(d) <= FLT_MAX ? d : 0.0f;
        }
    });
  }

  void encodeAndSend(Chunk& k) {
    for (size_t r = 0; r < ranks_; ++r) {
      uint8_t* dst = k.send + r * k.enc;
      forPieces(k.lo + k.shardLo(r), k.shardLen(r), [&](size_t at, size_t m, size_t eo) {
        stageIn_(at, at + m, x_);
        codec_.encode(x_, m, dst + eo, rt_, rng_);
        owe(at, m, false);
      });
    }
    k.a2a = c_.ialltoall(k.send, k.recv, k.enc, collUint8);
  }

  // This rank's shard of the sum, accumulated in float in rank order (the same on every
  // rank whatever the arrival order), re-encoded and all-gathered.
  void reduceAndGather(Chunk& k) {
    k.a2a->wait();
    uint8_t* mine = k.send + me_ * k.enc;
    forPieces(k.lo + k.shardLo(me_), k.shardLen(me_), [&](size_t at, size_t m, size_t eo) {
      std::fill(x_, x_ + m, 0.0f);
      for (size_t r = 0; r < ranks_; ++r) codec_.decodeAdd(k.recv + r * k.enc + eo, m, x_);
      codec_.encode(x_, m, mine + eo, rt_, rng_);
      // The re-encoding error is on the sum; owing it from this rank's next contribution
      // puts it back exactly once.
      owe(at, m, true);
    });
    k.ag = c_.iallgather(mine, k.send, k.enc, collUint8);
  }

  void receive(Chunk& k) {
    k.ag->wait();
    for (size_t r = 0; r < ranks_; ++r) {
      const uint8_t* src = k.send + r * k.enc;
      forPieces(k.lo + k.shardLo(r), k.shardLen(r), [&](size_t at, size_t m, size_t eo) {
        codec_.decode(src + eo, m, x_);
        stageOut_(at, at + m, x_);
      });
    }
  }

  Collectives& c_;
  const DenseCodec& codec_;
  const std::vector<CompressedSpan>& spans_;
  Rng& rng_;
  const StageInFn& stageIn_;
  const StageOutFn& stageOut_;
  size_t ranks_, me_, piece_;
  bool ef_ = false;
  float* x_ = nullptr;   // one piece: staged values, partial sums or decoded values
  float* rt_ = nullptr;  // one piece: decode(encode(x_)), with error feedback only
  std::vector<Chunk> chunks_;
};

}  // namespace

void denseCompressedAllreduce(Collectives& c, const DenseCodec& codec, size_t n,
                              const std::vector<CompressedSpan>& spans, FusionBuffers& bufs,
                              Rng& rng, size_t chunkElems, const StageInFn& stageIn,
                              const StageOutFn& stageOut) {
  DensePipeline(c, codec, n, spans, bufs, rng, chunkElems, stageIn, stageOut).run();
}

void denseCompressedAllreduce(Collectives& c, const DenseCodec& codec, float* buf, size_t n,
                              const std::vector<CompressedSpan>& spans, FusionBuffers& bufs,
                              Rng& rng, size_t chunkElems) {
  // A range is always staged in before the sum of the same range comes out.
  StageInFn in = [buf](size_t lo, size_t hi, float* dst) { std::copy(buf + lo, buf + hi, dst); };
  StageOutFn out = [buf](size_t lo, size_t hi, const float* src) { std::copy(src, src + (hi - lo), buf + lo); };
  denseCompressedAllreduce(c, codec, n, spans, bufs, rng, chunkElems, in, out);
}

TopkExchange::TopkExchange(double density, const std::vector<CompressedSpan>& spans)
    : spans_(spans), density_(density) {
  for (const auto& s : spans) {
    first_.push_back(total_);
    total_ += topkCount(s.count, density);
  }
  first_.push_back(total_);
  pairs_.reserve(total_);
  groupOf_.assign(spans.size(), 0);
  groupEnd_.assign(spans.size(), spans.size());
}

void TopkExchange::select(size_t j, const float* x, Rng& rng, std::vector<uint32_t>& scratch) {
  const CompressedSpan& s = spans_[j];
  size_t k = first_[j + 1] - first_[j];
  if (!x) {  // a joined rank: k zero entries keep every rank's message the same size
    for (size_t i = 0; i < k; ++i) pairs_.push_back({static_cast<uint32_t>(s.offset + i), 0.0f});
    return;
  }
  std::vector<uint32_t> idx;
  idx.reserve(k);
  selectTopK(x, s.count, k, static_cast<uint32_t>(s.offset), idx, rng, &scratch);
  take(j, x, idx);
}

void TopkExchange::selectAccumulate(size_t j, const float* gradient, float scale, Rng& rng,
                                    std::vector<uint32_t>& scratch) {
  const CompressedSpan& s = spans_[j];
  COLL_CHECK_ARG(s.residual, "top-k: selectAccumulate needs a residual for tensor ", j);
  size_t k = first_[j + 1] - first_[j];
  std::vector<uint32_t> idx;
  idx.reserve(k);
  selectTopKAccumulate(s.residual, gradient, scale, s.count, k, static_cast<uint32_t>(s.offset), idx, rng,
                       &scratch);
  take(j, s.residual, idx);
}

void TopkExchange::take(size_t j, const float* x, const std::vector<uint32_t>& idx) {
  const CompressedSpan& s = spans_[j];
  for (uint32_t i : idx) pairs_.push_back({i, x[i - s.offset]});
  // Selected entries are sent in full: with error feedback (x is the residual) they owe nothing.
  if (s.residual)
    for (uint32_t i : idx) s.residual[i - s.offset] = 0.0f;
}

void TopkExchange::prepare(Collectives& c, FusionBuffers& bufs) {
  const size_t ranks = static_cast<size_t>(c.size());
  size_t n = spans_.empty() ? 0 : spans_.back().offset + spans_.back().count;
  COLL_CHECK_ARG(n <= UINT32_MAX, "top-k compression: fused buffer of ", n, " elements exceeds 32-bit indices");
  all_ = static_cast<SparsePair*>(bufs.get(BufferSlot::Recv, std::max<size_t>(1, ranks * total_) * sizeof(SparsePair)));
  ranks_ = ranks;
}

std::unique_ptr<PendingOp> TopkExchange::startGroup(Collectives& c, size_t a, size_t b) {
  COLL_CHECK_ARG(all_ && a < b && b <= spans_.size() && pairs_.size() >= first_[b],
                 "top-k: group of spans [", a, ", ", b, ") started before its pairs were selected");
  for (size_t j = a; j < b; ++j) {
    groupOf_[j] = a;
    groupEnd_[j] = b;
  }
  const size_t m = pairsOf(a, b);
  if (m == 0) return nullptr;
  // Rank r's pairs of this group land at all_ + ranks * first_[a] + r * m.
  return c.iallgather(pairs_.data() + first_[a], all_ + ranks_ * first_[a], m * sizeof(SparsePair), collUint8);
}

void TopkExchange::accumulate(size_t j, float* out, float scale) const {
  const CompressedSpan& s = spans_[j];
  std::fill(out, out + s.count, 0.0f);
  const size_t a = groupOf_[j], m = pairsOf(a, groupEnd_[j]);
  for (size_t r = 0; r < ranks_; ++r) {
    const SparsePair* p = all_ + ranks_ * first_[a] + r * m - first_[a];
    for (size_t i = first_[j]; i < first_[j + 1]; ++i) {
      size_t at = static_cast<size_t>(p[i].index) - s.offset;
      if (at >= s.count)
        COLL_THROW(collRemoteError, "top-k: rank ", r, " sent index ", p[i].index, " outside tensor ", j,
                   " [", s.offset, ", ", s.offset + s.count, ")");
      out[at] += p[i].value * scale;
    }
  }
}

bool TopkExchange::denseIsCheaper(size_t ranks) const {
  size_t n = spans_.empty() ? 0 : spans_.back().offset + spans_.back().count;
  // The union of all ranks' entries may cover the buffer: a dense all-reduce moves less.
  return total_ * ranks >= n;
}

}  // namespace coll::engine

namespace coll::engine {

void TopkExchange::scatterLocal(float* dense) const {
  for (const auto& p : pairs_) dense[p.index] = p.value;
}

namespace {
constexpr size_t kTopkGroups = 4;           // pipeline depth of the sparse exchange
constexpr size_t kTopkGroupPairs = 32768;   // smallest group: 256 KiB per rank on the wire
}  // namespace

void topkAllreduce(Collectives& c, double density, float prescale, float outScale,
                   const std::vector<TopkTensor>& tensors, FusionBuffers& bufs, Rng& rng,
                   std::vector<uint32_t>* keptScratch) {
  std::vector<CompressedSpan> spans;
  size_t n = 0, biggest = 0;
  for (const auto& t : tensors) {
    spans.push_back({n, t.count, t.input ? t.residual : nullptr});
    n += t.count;
    biggest = std::max(biggest, t.count);
  }
  TopkExchange ex(density, spans);
  std::vector<uint32_t> ownScratch;
  std::vector<uint32_t>& scratch = keptScratch ? *keptScratch : ownScratch;
  float* staged = prescale != 1.0f ? static_cast<float*>(bufs.get(BufferSlot::Scratch, biggest * sizeof(float)))
                                   : nullptr;
  auto selectOne = [&](size_t j) {
    const TopkTensor& t = tensors[j];
    if (t.input && t.residual) {
      // The residual becomes the candidate values; "residual += gradient" happens inside
      // the selection scan, so the gradient is read once.
      ex.selectAccumulate(j, t.input, prescale, rng, scratch);
      return;
    }
    const float* x = t.input;
    if (x && staged) {
      for (size_t i = 0; i < t.count; ++i) staged[i] = t.input[i] * prescale;
      x = staged;
    }
    ex.select(j, x, rng, scratch);
  };
  const size_t m = tensors.size();
  if (ex.denseIsCheaper(static_cast<size_t>(c.size()))) {
    for (size_t j = 0; j < m; ++j) selectOne(j);
    auto* dense = static_cast<float*>(bufs.get(BufferSlot::Fused, 2 * n * sizeof(float)));
    std::fill(dense, dense + n, 0.0f);
    ex.scatterLocal(dense);
    c.allreduce(dense, dense + n, n, collFloat32, collSum);
    for (size_t j = 0; j < m; ++j)
      if (tensors[j].output)
        for (size_t i = 0; i < tensors[j].count; ++i)
          tensors[j].output[i] = dense[n + spans[j].offset + i] * outScale;
    return;
  }
  // Consecutive tensors in groups of about n / kTopkGroups elements (at least
  // kTopkGroupPairs pairs each): a group's pairs travel while the next group is selected,
  // and a group's sums are formed while later groups are still on the wire. The groups
  // depend on the tensor sizes only, so every rank sends the same ones.
  ex.prepare(c, bufs);
  const size_t total = ex.pairsOf(0, m);
  const size_t want = std::max<size_t>(kTopkGroupPairs, (total + kTopkGroups - 1) / kTopkGroups);
  std::vector<std::pair<size_t, size_t>> groups;
  std::vector<std::unique_ptr<PendingOp>> inflight;
  for (size_t a = 0; a < m;) {
    size_t b = a + 1;
    while (b < m && ex.pairsOf(a, b) < want) ++b;
    if (m - b > 0 && ex.pairsOf(b, m) < want / 2) b = m;  // no small tail group
    for (size_t j = a; j < b; ++j) selectOne(j);
    groups.push_back({a, b});
    inflight.push_back(ex.startGroup(c, a, b));
    a = b;
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (inflight[g]) inflight[g]->wait();
    for (size_t j = groups[g].first; j < groups[g].second; ++j)
      if (tensors[j].output) ex.accumulate(j, tensors[j].output, outScale);
  }
}

}  // namespace coll::engine
