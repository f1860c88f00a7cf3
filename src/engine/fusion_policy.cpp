#include "engine/fusion_policy.hpp"

#include <cmath>
#include <cstdint>

namespace coll::engine {
namespace {

bool fusableOp(OpType op) { return op == OpType::Allreduce || op == OpType::Broadcast; }

bool runsAlone(const Response& r, const FusionParams& p) {
  if (r.error || !fusableOp(r.meta.op)) return true;
  size_t bytes = r.meta.byteSize();
  bool compressed = r.meta.compression.kind != CompressKind::None;
  if (compressed) return false;  // compression needs the staging buffers anyway
  return bytes >= p.thresholdBytes || (p.directBytes > 0 && bytes >= p.directBytes);
}

}  // namespace

uint8_t directLog2ForLatency(double alphaUs) {
  double bytes = alphaUs * kCopyBytesPerUs / 2;
  if (!(bytes > 1)) return kDirectLog2Min;  // also NaN
  double k = std::round(std::log2(bytes));
  if (k < kDirectLog2Min) return kDirectLog2Min;
  if (k > kDirectLog2Max) return kDirectLog2Max;
  return static_cast<uint8_t>(k);
}

size_t directBytesFromLog2(uint8_t log2Bytes) {
  if (log2Bytes == kDirectUnknown) return kDirectBytesFallback;
  uint8_t k = log2Bytes < kDirectLog2Min ? kDirectLog2Min : (log2Bytes > kDirectLog2Max ? kDirectLog2Max : log2Bytes);
  return size_t{1} << k;
}

bool fusable(const Response& a, const Response& b) {
  const RequestMeta& x = a.meta;
  const RequestMeta& y = b.meta;
  if (a.error || b.error || x.op != y.op || !fusableOp(x.op)) return false;
  if (x.dtype != y.dtype || x.device != y.device) return false;
  // Joined ranks contribute zeros for whole tensors; keeping such tensors apart keeps
  // the zero-fill a per-group decision.
  if (a.joined != b.joined) return false;
  if (x.op == OpType::Broadcast) return x.root == y.root;
  return x.redOp == y.redOp && x.prescale == y.prescale && x.postscale == y.postscale &&
         x.compression == y.compression;
}

std::vector<FusionGroup> planFusion(const std::vector<Response>& ready, const FusionParams& p) {
  std::vector<FusionGroup> groups;
  std::vector<bool> taken(ready.size(), false);
  for (size_t i = 0; i < ready.size(); ++i) {
    if (taken[i]) continue;
    taken[i] = true;
    FusionGroup g;
    g.members.push_back(i);
    g.bytes = ready[i].error ? 0 : ready[i].meta.byteSize();
    if (runsAlone(ready[i], p)) {
      g.useBuffer = !ready[i].error && ready[i].meta.compression.kind != CompressKind::None;
      groups.push_back(std::move(g));
      continue;
    }
    int64_t elements = ready[i].error ? 0 : ready[i].meta.numElements();
    // Look ahead past incompatible tensors: the order within a round is arbitrary anyway,
    // and filling one buffer beats issuing several small collectives.
    for (size_t j = i + 1; j < ready.size(); ++j) {
      if (taken[j] || runsAlone(ready[j], p) || !fusable(ready[i], ready[j])) continue;
      size_t b = ready[j].meta.byteSize();
      if (g.bytes + b > p.thresholdBytes) continue;
      // Top-k indexes the fused buffer's elements with 32 bits (each tensor is held under
      // that at the call): a group past it would be refused on the engine's thread.
      if (ready[i].meta.compression.kind == CompressKind::TopK &&
          static_cast<uint64_t>(elements) + static_cast<uint64_t>(ready[j].meta.numElements()) > UINT32_MAX)
        continue;
      taken[j] = true;
      g.members.push_back(j);
      g.bytes += b;
      elements += ready[j].meta.numElements();
    }
    // A tensor that ends up alone gains nothing from staging: run it in place.
    if (g.members.size() == 1 && ready[i].meta.compression.kind == CompressKind::None)
      g.useBuffer = false;
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace coll::engine
