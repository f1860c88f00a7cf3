// Allreduce and broadcast: the fusable operations.
#include <algorithm>
#include <cstring>

#include "base/error.hpp"
#include "base/types.hpp"
#include "engine/compression/compressed_allreduce.hpp"
#include "engine/executor.hpp"
#include "engine/fusion_copy.hpp"

namespace coll::engine {

void Executor::trace(const std::vector<Member>& m, const char* phase, Clock::time_point a,
                     Clock::time_point b) {
  if (!timeline_) return;
  for (const auto& x : m) timeline_->span(x.resp->name(), phase, opTypeName(x.resp->meta.op), a, b);
}

void Executor::run(const std::vector<Response>& ready, const FusionGroup& g,
                   const std::vector<Entry*>& local) {
  std::vector<Member> m;
  for (size_t i = 0; i < g.members.size(); ++i) m.push_back({&ready[g.members[i]], local[i]});
  const RequestMeta& meta = m[0].resp->meta;
  switch (meta.op) {
    case OpType::Allreduce:
      if (meta.compression.kind != CompressKind::None) {
        allreduceCompressed(m);
      } else {
        auto f = startAllreduce(ready, g, local, BufferSlot::Fused);
        finishAllreduce(*f);
      }
      break;
    case OpType::Broadcast:
      if (g.useBuffer) broadcastFused(m);
      else broadcastDirect(m[0]);
      break;
    case OpType::Allgather: allgather(m[0]); break;
    case OpType::Alltoall: alltoall(m[0]); break;
    case OpType::Reducescatter: reducescatter(m[0]); break;
    case OpType::Barrier:
      c_.barrier();
      ++counters_.collectives;
      break;
    default:
      COLL_THROW(collInternalError, "executor: operation ", opTypeName(meta.op),
                 " of tensor '", meta.name, "' is not a data collective");
  }
}

void Executor::stageIn(InFlight& f, size_t lo, size_t hi) {
  const RequestMeta& meta = f.members[0].resp->meta;
  const size_t es = typeSize(meta.dtype);
  for (size_t j = 0; j < f.members.size(); ++j) {
    size_t off = f.offsets[j], n = static_cast<size_t>(f.members[j].resp->meta.numElements());
    size_t from = std::max(lo, off), to = std::min(hi, off + n);
    if (from >= to) continue;
    if (const Entry* e = f.members[j].entry)
      scaledCopy(f.buf + from * es, static_cast<const uint8_t*>(e->input) + (from - off) * es, to - from,
                 meta.dtype, meta.prescale);
    else
      std::memset(f.buf + from * es, 0, (to - from) * es);
  }
}

void Executor::stageOut(InFlight& f, size_t lo, size_t hi) {
  const RequestMeta& meta = f.members[0].resp->meta;
  const size_t es = typeSize(meta.dtype);
  for (size_t j = 0; j < f.members.size(); ++j) {
    size_t off = f.offsets[j], n = static_cast<size_t>(f.members[j].resp->meta.numElements());
    size_t from = std::max(lo, off), to = std::min(hi, off + n);
    if (from >= to) continue;
    if (Entry* e = f.members[j].entry)
      scaledCopy(static_cast<uint8_t*>(e->output) + (from - off) * es, f.buf + from * es, to - from,
                 meta.dtype, meta.postscale);
  }
}

std::unique_ptr<Executor::InFlight> Executor::startAllreduce(const std::vector<Response>& ready,
                                                             const FusionGroup& g,
                                                             const std::vector<Entry*>& local,
                                                             BufferSlot slot) {
  auto f = std::make_unique<InFlight>();
  for (size_t i = 0; i < g.members.size(); ++i) f->members.push_back({&ready[g.members[i]], local[i]});
  const RequestMeta& meta = f->members[0].resp->meta;
  const size_t es = typeSize(meta.dtype);
  f->fused = g.useBuffer;
  f->t0 = Clock::now();
  if (f->fused) {
    size_t total = 0;
    for (const auto& x : f->members) {
      f->offsets.push_back(total);
      total += static_cast<size_t>(x.resp->meta.numElements());
    }
    f->buf = static_cast<uint8_t*>(bufs_.get(slot, total * es));
    // Piece k+1 is staged while piece k is on the wire; results come back piece by piece.
    size_t chunk = std::max<size_t>(1, fusionChunkBytes_ / es);
    for (size_t lo = 0; lo < total || lo == 0; lo += chunk) {
      size_t hi = std::min(total, lo + chunk);
      stageIn(*f, lo, hi);
      if (lo == 0) f->t1 = Clock::now();
      f->chunks.push_back({lo, hi});
      f->ops.push_back(c_.iallreduce(f->buf + lo * es, f->buf + lo * es, hi - lo, meta.dtype, meta.redOp));
      ++counters_.collectives;
      if (hi == total) break;
    }
    counters_.fusedTensors += f->members.size();
  } else {
    // Unfused: in place in the user's output, with the same scaling routines as the fused
    // path, which keeps the two bit-identical.
    const Member& x = f->members[0];
    size_t n = static_cast<size_t>(meta.numElements());
    const void* send;
    if (x.entry) {
      f->recv = x.entry->output;
      send = x.entry->input;
      if (meta.prescale != 1.0) {
        scaledCopy(f->recv, send, n, meta.dtype, meta.prescale);
        send = f->recv;
      }
    } else {
      f->joinedSend = bufs_.zeros(n * es);  // held until the send completes
      send = f->joinedSend.get();
      f->joinedRecv.resize(n * es);
      f->recv = f->joinedRecv.data();
    }
    f->t1 = Clock::now();
    f->ops.push_back(c_.iallreduce(send, f->recv, n, meta.dtype, meta.redOp));
    ++counters_.collectives;
  }
  return f;
}

void Executor::finishAllreduce(InFlight& f) {
  const RequestMeta& meta = f.members[0].resp->meta;
  Clock::time_point t2{};
  for (size_t k = 0; k < f.ops.size(); ++k) {
    f.ops[k]->wait();
    if (k == 0) t2 = Clock::now();
    if (f.fused) stageOut(f, f.chunks[k].first, f.chunks[k].second);
  }
  if (!f.fused && f.members[0].entry && meta.postscale != 1.0)
    scaledCopy(f.recv, f.recv, static_cast<size_t>(meta.numElements()), meta.dtype, meta.postscale);
  auto t3 = Clock::now();
  // Pieces overlap: copy-in ends when the first piece is issued, copy-out starts when the
  // first piece is back.
  trace(f.members, "copy-in", f.t0, f.t1);
  trace(f.members, "collective", f.t1, t2);
  trace(f.members, "copy-out", t2, t3);
}

void Executor::allreduceCompressed(const std::vector<Member>& m) {
  const RequestMeta& meta = m[0].resp->meta;
  const bool ef = meta.compression.usesErrorFeedback();
  const float pre = static_cast<float>(meta.prescale);
  // Average divides once, at the end, together with the postscale.
  const float post = static_cast<float>(meta.postscale / (meta.redOp == collAvg ? c_.size() : 1));
  auto residualOf = [&](const Member& x, size_t n) {
    return (ef && x.entry) ? residuals_.get(x.resp->name(), n) : nullptr;
  };
  auto t0 = Clock::now();
  if (meta.compression.kind == CompressKind::TopK) {
    // Top-k reads the inputs (or residuals) in place: no staging pass.
    std::vector<TopkTensor> ts;
    for (const auto& x : m) {
      size_t n = static_cast<size_t>(x.resp->meta.numElements());
      ts.push_back({x.entry ? static_cast<const float*>(x.entry->input) : nullptr,
                    x.entry ? static_cast<float*>(x.entry->output) : nullptr, n, residualOf(x, n)});
    }
    topkAllreduce(c_, meta.compression.density, pre, post, ts, bufs_, rng_, &topkScratch_);
    counters_.collectives += 1;
    counters_.fusedTensors += m.size();
    trace(m, "compress+collective", t0, Clock::now());
    return;
  }
  size_t total = 0;
  std::vector<CompressedSpan> spans;
  for (const auto& x : m) {
    size_t n = static_cast<size_t>(x.resp->meta.numElements());
    spans.push_back({total, n, residualOf(x, n)});
    total += n;
  }
  // Staging in and out happens piece by piece inside the pipeline, overlapping transfers.
  StageInFn stageIn = [&](size_t lo, size_t hi, float* dst) {
    forSpans(spans, lo, hi, [&](size_t j, size_t from, size_t to) {
      const Entry* e = m[j].entry;
      if (!e) {
        std::fill(dst + (from - lo), dst + (to - lo), 0.0f);
        return;
      }
      const size_t at = from - spans[j].offset;
      float* res = spans[j].residual;
      floatStageIn(dst + (from - lo), static_cast<const float*>(e->input) + at, to - from, pre,
                   res ? res + at : nullptr);
    });
  };
  StageOutFn stageOut = [&](size_t lo, size_t hi, const float* src) {
    forSpans(spans, lo, hi, [&](size_t j, size_t from, size_t to) {
      if (const Entry* e = m[j].entry)
        floatStageOut(static_cast<float*>(e->output) + (from - spans[j].offset), src + (from - lo), to - from, post);
    });
  };
  denseCompressedAllreduce(c_, *codecFor(meta.compression), total, spans, bufs_, rng_, chunkElems_, stageIn,
                           stageOut);
  counters_.collectives += 2;
  counters_.fusedTensors += m.size();
  trace(m, "copy-in+compress+collective+copy-out", t0, Clock::now());
}

const DenseCodec* Executor::codecFor(const CompressionSpec& spec) {
  if (!codec_ || !(codecSpec_ == spec)) {
    codec_ = makeDenseCodec(spec);
    codecSpec_ = spec;
  }
  return codec_.get();
}

void Executor::broadcastFused(const std::vector<Member>& m) {
  const RequestMeta& meta = m[0].resp->meta;
  const size_t es = typeSize(meta.dtype);
  const bool root = c_.rank() == meta.root;
  size_t total = 0;
  for (const auto& x : m) total += static_cast<size_t>(x.resp->meta.numElements());
  auto* buf = static_cast<uint8_t*>(bufs_.get(BufferSlot::Fused, total * es));
  auto t0 = Clock::now();
  size_t off = 0;
  for (const auto& x : m) {
    size_t bytes = x.resp->meta.byteSize();
    if (root) {
      std::memcpy(buf + off, x.entry->input, bytes);
      if (x.entry->output != x.entry->input) std::memcpy(x.entry->output, x.entry->input, bytes);
    }
    off += bytes;
  }
  auto t1 = Clock::now();
  c_.broadcast(buf, buf, total, meta.dtype, meta.root);
  auto t2 = Clock::now();
  off = 0;
  for (const auto& x : m) {
    size_t bytes = x.resp->meta.byteSize();
    if (!root) std::memcpy(x.entry->output, buf + off, bytes);
    off += bytes;
  }
  auto t3 = Clock::now();
  ++counters_.collectives;
  counters_.fusedTensors += m.size();
  trace(m, "copy-in", t0, t1);
  trace(m, "collective", t1, t2);
  trace(m, "copy-out", t2, t3);
}

void Executor::broadcastDirect(const Member& m) {
  const RequestMeta& meta = m.resp->meta;
  auto t0 = Clock::now();
  c_.broadcast(m.entry->input, m.entry->output, static_cast<size_t>(meta.numElements()),
               meta.dtype, meta.root);
  ++counters_.collectives;
  trace(m, "collective", t0, Clock::now());
}

}  // namespace coll::engine
