#include "cuda/stream_plan.hpp"

#include <algorithm>

#include "base/error.hpp"

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

// Within one op the two sides are the same buffer, one inside the other, or disjoint.
void checkAliasing(const StreamOpSpec& s, size_t i) {
  if (!(s.sendOnDevice && s.sendBytes > 0 && s.recvOnDevice && s.recvBytes > 0)) return;
  const uintptr_t a = addr(s.send), b = addr(s.recv);
  const bool sendInRecv = a >= b && a + s.sendBytes <= b + s.recvBytes;
  const bool recvInSend = b >= a && b + s.recvBytes <= a + s.sendBytes;
  const bool disjoint = a + s.sendBytes <= b || b + s.recvBytes <= a;
  COLL_CHECK_ARG(sendInRecv || recvInSend || disjoint, "stream op ", i, ": send ", s.send, " (",
                 s.sendBytes, " bytes) and recv ", s.recv, " (", s.recvBytes,
                 " bytes) overlap without one containing the other");
}

// A staged side: device bytes [begin, end) of part `part`.
struct Side {
  uintptr_t begin, end;
  size_t part;
  bool recv;
};

// Device bytes that overlapping sides share: one staging region.
struct Region {
  uintptr_t begin, end;
};

// Merges the sides into regions, in the order their first side appears (so a lone
// out-of-place op has its send region first).
std::vector<Region> mergeSides(const std::vector<Side>& sides) {
  std::vector<Region> regions;
  for (const Side& s : sides) {
    Region merged{s.begin, s.end};
    size_t at = regions.size();
    for (size_t r = 0; r < regions.size();) {
      if (regions[r].begin < merged.end && merged.begin < regions[r].end) {
        merged.begin = std::min(merged.begin, regions[r].begin);
        merged.end = std::max(merged.end, regions[r].end);
        at = std::min(at, r);
        if (r != at) {
          regions.erase(regions.begin() + static_cast<std::ptrdiff_t>(r));
          continue;
        }
      }
      ++r;
    }
    if (at == regions.size()) regions.push_back(merged);
    else regions[at] = merged;
  }
  return regions;
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
  std::vector<Side> sides;
  for (size_t i = 0; i < parts.size(); ++i) {
    const StreamOpSpec& s = parts[i];
    checkPart(s, i);
    checkAliasing(s, i);
    if (s.sendOnDevice && s.sendBytes > 0) sides.push_back({addr(s.send), addr(s.send) + s.sendBytes, i, false});
    if (s.recvOnDevice && s.recvBytes > 0) sides.push_back({addr(s.recv), addr(s.recv) + s.recvBytes, i, true});
  }
  // Device bytes that several sides touch (an in-place op, or a group whose ops share a
  // buffer) are staged once, so the host collectives see what they would see on the
  // device: an op reads what an earlier op of the group wrote.
  const std::vector<Region> regions = mergeSides(sides);
  std::vector<size_t> offsets;
  size_t base = 0;
  for (const Region& r : regions) {
    offsets.push_back(base);
    plan.stagingBytes = base + (r.end - r.begin);
    base = alignUp(plan.stagingBytes);
  }
  for (const Side& side : sides)
    for (size_t r = 0; r < regions.size(); ++r)
      if (side.begin >= regions[r].begin && side.end <= regions[r].end) {
        const size_t off = offsets[r] + (side.begin - regions[r].begin);
        (side.recv ? plan.layouts[side.part].recvOffset : plan.layouts[side.part].sendOffset) = off;
        break;
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
