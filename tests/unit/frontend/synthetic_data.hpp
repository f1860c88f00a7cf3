// A small synthetic classification set for training tests: 10 classes of 28x28 noise,
// each with a bright 6x6 patch at a class-specific place.
#pragma once

#include "data/fashion_mnist.hpp"
#include "rng.hpp"

namespace collective::frontend::testing {

inline Dataset patchData(int64_t n, uint64_t seed) {
  Dataset d;
  d.count = n;
  d.rows = d.cols = 28;
  d.pixels.resize(static_cast<size_t>(n * 784));
  d.labels.resize(static_cast<size_t>(n));
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = static_cast<int32_t>(rng.below(10));
    d.labels[i] = label;
    uint8_t* img = d.pixels.data() + i * 784;
    for (int p = 0; p < 784; ++p) img[p] = static_cast<uint8_t>(rng.below(120));
    const int y0 = 2 + (label / 5) * 14, x0 = 2 + (label % 5) * 5;
    for (int y = y0; y < y0 + 6; ++y)
      for (int x = x0; x < x0 + 6 && x < 28; ++x) img[y * 28 + x] = 255;
  }
  return d;
}

}  // namespace collective::frontend::testing
