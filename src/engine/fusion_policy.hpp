// Fusion policy: which ready tensors may share one collective. Only the decision lives
// here (pure logic); buffers are in fusion_buffer.hpp and packing in fusion_copy.hpp.
//
// Every rank plans from the same ordered response list, so the plan (and therefore the
// sequence of collectives) is identical everywhere.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/request.hpp"

namespace coll::engine {

struct FusionParams {
  size_t thresholdBytes = 128u << 20;  // most bytes one fused collective carries
  // Uncompressed tensors at least this large run alone, in place in the user's buffer:
  // copying them costs more than the per-collective overhead they would save. 0: off.
  size_t directBytes = 0;
};

struct FusionGroup {
  std::vector<size_t> members;  // indices into the response list, in execution order
  bool useBuffer = true;        // false: one tensor, executed in place
  size_t bytes = 0;             // payload bytes before compression
};

// True when a and b may share one collective.
bool fusable(const Response& a, const Response& b);
std::vector<FusionGroup> planFusion(const std::vector<Response>& ready, const FusionParams& p);

}  // namespace coll::engine
