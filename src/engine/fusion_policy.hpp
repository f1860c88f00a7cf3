// Fusion policy: which ready tensors may share one collective. Only the decision lives
// here (pure logic); buffers are in fusion_buffer.hpp and packing in fusion_copy.hpp.
//
// Every rank plans from the same ordered response list, so the plan (and therefore the
// sequence of collectives) is identical everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/request.hpp"

namespace coll::engine {

struct FusionParams {
  size_t thresholdBytes = 128u << 20;  // most bytes one fused collective carries
  // Uncompressed tensors at least this large run alone, in place in the user's buffer:
  // copying them costs more than the per-collective overhead they would save. 0: off.
  size_t directBytes = 0;
  // COLL_FUSION_DIRECT_BYTES=auto: the engine sets directBytes each round from the
  // latency it measures (directLog2ForLatency), agreed on by every rank.
  bool directAuto = false;
};

// The automatic direct threshold. Run alone, a tensor of b bytes costs one more
// collective's latency alpha; fused, it costs a copy in and a copy out, 2b over one core's
// copy bandwidth. Alone wins from b = alpha * bandwidth / 2. Returned as log2 of the
// threshold (rounded, clamped to 4 KiB .. 128 MiB) so that it fits the control vector.
constexpr double kCopyBytesPerUs = 8000;  // one core's memcpy, about 8 GB/s
constexpr uint8_t kDirectLog2Min = 12, kDirectLog2Max = 27;
constexpr uint8_t kDirectUnknown = 255;          // no measurement yet
constexpr size_t kDirectBytesFallback = 1 << 20; // threshold until there is one
uint8_t directLog2ForLatency(double alphaUs);
size_t directBytesFromLog2(uint8_t log2Bytes);

struct FusionGroup {
  std::vector<size_t> members;  // indices into the response list, in execution order
  bool useBuffer = true;        // false: one tensor, executed in place
  size_t bytes = 0;             // payload bytes before compression
};

// True when a and b may share one collective.
bool fusable(const Response& a, const Response& b);
std::vector<FusionGroup> planFusion(const std::vector<Response>& ready, const FusionParams& p);

}  // namespace coll::engine
