// Allgather, alltoall and reducescatter: one tensor at a time, outputs sized by the
// negotiation (every rank's first dimension and splits are known from the response).
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.hpp"
#include "base/types.hpp"
#include "engine/executor.hpp"
#include "engine/fusion_copy.hpp"

namespace coll::engine {
namespace {

// Fresh memory for an output the engine makes. A large one is aligned to and advised as
// huge pages: the collective then faults in a page per 2 MiB instead of per 4 KiB, which
// for a 128 MiB all-gather output is most of the time its first touch would take.
void* allocateHostOutput(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  if (bytes < kHuge) return std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, rounded);
  if (p) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without huge pages it still works
  return p;
}

}  // namespace

void* Executor::allocateOutput(Entry& e, std::vector<int64_t> shape) {
  collective::hvd::Tensor spec;
  spec.dtype = e.meta.dtype;
  spec.shape = std::move(shape);
  spec.device = collective::hvd::Device::cpu();
  size_t bytes = spec.byte_size();
  auto& out = e.handle->output;
  if (e.allocate) {
    spec.data = e.allocate(spec);
    if (!spec.data && bytes > 0)
      COLL_THROW(collInvalidArgument, "tensor '", e.meta.name, "': the output allocator returned "
                 "null for ", bytes, " bytes");
  } else {
    void* p = allocateHostOutput(bytes);
    if (!p) COLL_THROW(collSystemError, "tensor '", e.meta.name, "': cannot allocate ", bytes, " bytes");
    out.storage = std::shared_ptr<void>(p, std::free);
    spec.data = p;
  }
  out.tensor = spec;
  return spec.data;
}

void Executor::allgather(const Member& m) {
  const RequestMeta& meta = m.resp->meta;
  const auto& dims = m.resp->firstDims;
  const size_t ranks = dims.size();
  const size_t rowBytes = static_cast<size_t>(meta.rowElements()) * typeSize(meta.dtype);
  int64_t totalRows = 0, maxRows = 0;
  for (int64_t d : dims) {
    totalRows += d;
    maxRows = std::max(maxRows, d);
  }
  std::vector<int64_t> shape = meta.shape.empty() ? std::vector<int64_t>{1} : meta.shape;
  shape[0] = totalRows;
  auto* out = static_cast<uint8_t*>(allocateOutput(*m.entry, shape));
  const size_t block = static_cast<size_t>(maxRows) * rowBytes;
  const size_t mine = static_cast<size_t>(dims[c_.rank()]) * rowBytes;
  auto t0 = Clock::now();
  bool even = std::all_of(dims.begin(), dims.end(), [&](int64_t d) { return d == dims[0]; });
  if (even) {
    c_.allgather(m.entry->input, out, block, collUint8);
  } else {
    // No variable all-gather in the API: pad every rank's part to the largest, then compact.
    auto* send = static_cast<uint8_t*>(bufs_.get(BufferSlot::Send, block));
    auto* recv = static_cast<uint8_t*>(bufs_.get(BufferSlot::Recv, block * ranks));
    std::memcpy(send, m.entry->input, mine);
    std::memset(send + mine, 0, block - mine);
    c_.allgather(send, recv, block, collUint8);
    size_t at = 0;
    for (size_t r = 0; r < ranks; ++r) {
      size_t part = static_cast<size_t>(dims[r]) * rowBytes;
      std::memcpy(out + at, recv + r * block, part);
      at += part;
    }
  }
  ++counters_.collectives;
  trace(m, "collective", t0, Clock::now());
}

void Executor::alltoall(const Member& m) {
  const RequestMeta& meta = m.resp->meta;
  const size_t ranks = m.resp->firstDims.size();
  const size_t me = static_cast<size_t>(c_.rank());
  const size_t rowBytes = static_cast<size_t>(meta.rowElements()) * typeSize(meta.dtype);
  const auto& mat = m.resp->splitMatrix;  // mat[s * ranks + d]: rows s sends to d
  std::vector<size_t> sc(ranks), sd(ranks), rc(ranks), rd(ranks);
  std::vector<int64_t> received(ranks);
  size_t sOff = 0, rOff = 0;
  int64_t rows = 0;
  for (size_t p = 0; p < ranks; ++p) {
    sc[p] = static_cast<size_t>(mat[me * ranks + p]) * rowBytes;
    sd[p] = sOff;
    sOff += sc[p];
    received[p] = mat[p * ranks + me];
    rc[p] = static_cast<size_t>(received[p]) * rowBytes;
    rd[p] = rOff;
    rOff += rc[p];
    rows += received[p];
  }
  std::vector<int64_t> shape = meta.shape.empty() ? std::vector<int64_t>{1} : meta.shape;
  shape[0] = rows;
  void* out = allocateOutput(*m.entry, shape);
  m.entry->handle->output.received_splits = received;
  auto t0 = Clock::now();
  c_.alltoallv(m.entry->input, sc, sd, out, rc, rd);
  ++counters_.collectives;
  trace(m, "collective", t0, Clock::now());
}

void Executor::reducescatter(const Member& m) {
  const RequestMeta& meta = m.resp->meta;
  const size_t ranks = static_cast<size_t>(c_.size());
  const size_t me = static_cast<size_t>(c_.rank());
  const size_t es = typeSize(meta.dtype);
  const size_t rowElems = static_cast<size_t>(meta.rowElements());
  const size_t rows = meta.shape.empty() ? 1 : static_cast<size_t>(meta.shape[0]);
  // The first rows % ranks ranks get one extra row, like an even split of a dataset.
  auto rowsOf = [&](size_t r) { return rows / ranks + (r < rows % ranks ? 1 : 0); };
  auto firstRow = [&](size_t r) { return r * (rows / ranks) + std::min(r, rows % ranks); };
  const size_t maxRows = (rows + ranks - 1) / ranks;
  const size_t block = maxRows * rowElems;  // elements per rank in the padded layout
  std::vector<int64_t> shape = meta.shape.empty() ? std::vector<int64_t>{1} : meta.shape;
  shape[0] = static_cast<int64_t>(rowsOf(me));
  void* out = allocateOutput(*m.entry, shape);
  auto t0 = Clock::now();
  auto* send = static_cast<uint8_t*>(bufs_.get(BufferSlot::Send, block * ranks * es));
  auto* recv = static_cast<uint8_t*>(bufs_.get(BufferSlot::Recv, block * es));
  const auto* in = static_cast<const uint8_t*>(m.entry->input);
  for (size_t r = 0; r < ranks; ++r) {
    size_t n = rowsOf(r) * rowElems;
    scaledCopy(send + r * block * es, in + firstRow(r) * rowElems * es, n, meta.dtype, meta.prescale);
    std::memset(send + (r * block + n) * es, 0, (block - n) * es);
  }
  auto t1 = Clock::now();
  c_.reduceScatter(send, recv, block, meta.dtype, meta.redOp);
  auto t2 = Clock::now();
  scaledCopy(out, recv, rowsOf(me) * rowElems, meta.dtype, meta.postscale);
  ++counters_.collectives;
  trace(m, "copy-in", t0, t1);
  trace(m, "collective", t1, t2);
  trace(m, "copy-out", t2, Clock::now());
}

}  // namespace coll::engine
