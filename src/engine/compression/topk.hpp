// Top-k sparsification: keep the k = ceil(density * n) entries of largest magnitude.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/compression/codec.hpp"

namespace coll::engine {

// One sent entry: index into the fused buffer and its value (8 bytes on the wire).
struct SparsePair {
  uint32_t index;
  float value;
};

size_t topkCount(size_t n, double density);

// Appends to `out` the indices (base + i) of exactly k elements of x with the largest |x|,
// in no particular order (ties broken arbitrarily). The threshold comes from a strided
// sample and is refined over the candidates above it, so there is no full sort.
// scratch (optional) is reused between calls to hold candidate indices.
void selectTopK(const float* x, size_t n, size_t k, uint32_t base, std::vector<uint32_t>& out,
                Rng& rng, std::vector<uint32_t>* scratch = nullptr);

// The same on x[i] + add[i] * scale, which is written back into x by the (first) scan:
// error feedback's "residual += gradient" folded into the selection pass.
void selectTopKAccumulate(float* x, const float* add, float scale, size_t n, size_t k,
                          uint32_t base, std::vector<uint32_t>& out, Rng& rng,
                          std::vector<uint32_t>* scratch = nullptr);

}  // namespace coll::engine
