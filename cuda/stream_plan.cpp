#include "cuda/stream_plan.hpp"

#include "core/error.hpp"

namespace coll::cuda {
namespace {

size_t alignUp(size_t x) { return (x + kStagingAlign - 1) / kStagingAlign * kStagingAlign; }

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

void checkPart(const StreamOpSpec& s, size_t i) {
  COLL_CHECK_ARG(s.elemSize > 0, "stream op ", i, ": elemSize is 0");
  COLL_CHECK_ARG(s.sendBytes == 0 || s.send, "stream op ", i, ": send is NULL with sendBytes = ",
                 s.sendBytes);
  COLL_CHECK_ARG(s.recvBytes == 0 || s.recv, "stream op ", i, ": recv is NULL with recvBytes = ",
                 s.recvBytes);
  COLL_CHECK_ARG(s.count <= SIZE_MAX / s.elemSize, "stream op ", i, ": count ", s.count,
                 " * elemSize ", s.elemSize, " overflows");
  if (!s.elementwise) return;
  const size_t bytes = s.count * s.elemSize;
  COLL_CHECK_ARG(s.sendBytes == 0 || s.sendBytes == bytes, "stream op ", i,
                 ": element-wise op with sendBytes = ", s.sendBytes, ", expected 0 or count * elemSize = ",
                 bytes);
  COLL_CHECK_ARG(s.recvBytes == 0 || s.recvBytes == bytes, "stream op ", i,
                 ": element-wise op with recvBytes = ", s.recvBytes, ", expected 0 or count * elemSize = ",
                 bytes);
}

// Lays out one part from `base`; returns the bytes it takes.
size_t layoutPart(const StreamOpSpec& s, size_t i, size_t base, StagingLayout& out) {
  const bool send = s.sendOnDevice && s.sendBytes > 0;
  const bool recv = s.recvOnDevice && s.recvBytes > 0;
  if (send && recv) {
    const uintptr_t a = addr(s.send), b = addr(s.recv);
    if (a >= b && a + s.sendBytes <= b + s.recvBytes) {  // send within recv (incl. in place)
      out.recvOffset = base;
      out.sendOffset = base + (a - b);
      return s.recvBytes;
    }
    if (b >= a && b + s.recvBytes <= a + s.sendBytes) {  // recv within send
      out.sendOffset = base;
      out.recvOffset = base + (b - a);
      return s.sendBytes;
    }
    COLL_CHECK_ARG(a + s.sendBytes <= b || b + s.recvBytes <= a, "stream op ", i, ": send ",
                   s.send, " (", s.sendBytes, " bytes) and recv ", s.recv, " (", s.recvBytes,
                   " bytes) overlap without one containing the other");
    out.sendOffset = base;
    out.recvOffset = base + alignUp(s.sendBytes);
    return alignUp(s.sendBytes) + s.recvBytes;
  }
  if (send) {
    out.sendOffset = base;
    return s.sendBytes;
  }
  if (recv) {
    out.recvOffset = base;
    return s.recvBytes;
  }
  return 0;
}

}  // namespace

std::vector<ChunkPlan> planChunks(size_t count, size_t elemSize, bool elementwise,
                                  size_t chunkBytes) {
  if (!elementwise || chunkBytes == 0) return {ChunkPlan{}};
  if (count == 0) return {ChunkPlan{0, 0}};
  const size_t per = elemSize == 0 || chunkBytes / elemSize == 0 ? 1 : chunkBytes / elemSize;
  std::vector<ChunkPlan> chunks;
  chunks.reserve(count / per + 1);
  for (size_t off = 0; off < count; off += per)
    chunks.push_back({off, count - off < per ? count - off : per});
  return chunks;
}

JobPlan planJob(const std::vector<StreamOpSpec>& parts, size_t chunkBytes) {
  COLL_CHECK_ARG(!parts.empty(), "stream job without operations");
  JobPlan plan;
  plan.layouts.resize(parts.size());
  size_t base = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    checkPart(parts[i], i);
    const size_t used = layoutPart(parts[i], i, base, plan.layouts[i]);
    plan.stagingBytes = base + used;
    base = alignUp(base + used);
  }
  // A group's ops run together as one host call, so only a lone op is chunked.
  const StreamOpSpec& s = parts[0];
  plan.chunks = parts.size() == 1 ? planChunks(s.count, s.elemSize, s.elementwise, chunkBytes)
                                  : std::vector<ChunkPlan>{ChunkPlan{}};
  return plan;
}

ByteRange chunkRange(const StreamOpSpec& spec, const ChunkPlan& c, size_t sideBytes) {
  if (c.whole() || sideBytes == 0) return {0, sideBytes};
  return {c.offset * spec.elemSize, c.count * spec.elemSize};
}

HostView viewOf(const StreamOpSpec& spec, const StagingLayout& layout, const ChunkPlan& c,
                void* staging) {
  auto* block = static_cast<char*>(staging);
  const char* send = layout.sendStaged() ? block + layout.sendOffset : static_cast<const char*>(spec.send);
  char* recv = layout.recvStaged() ? block + layout.recvOffset : static_cast<char*>(spec.recv);
  HostView v;
  v.offset = c.whole() ? 0 : c.offset;
  v.count = c.whole() ? spec.count : c.count;
  // A side the op does not use on this rank is NULL: it may be a device pointer, which
  // the host collective must never see.
  v.send = spec.sendBytes ? send + chunkRange(spec, c, spec.sendBytes).offset : nullptr;
  v.recv = spec.recvBytes ? recv + chunkRange(spec, c, spec.recvBytes).offset : nullptr;
  return v;
}

}  // namespace coll::cuda
