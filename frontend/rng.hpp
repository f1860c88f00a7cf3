// Deterministic random numbers for initialisation and shuffling.
//
// std::uniform_real_distribution and std::shuffle are implementation-defined, so two
// builds (or two ranks built differently) could disagree; everything here is spelled
// out so that a seed means the same stream everywhere.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace collective::frontend {

// xoshiro256** seeded through splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  // A generator for a named sub-stream (a layer, an epoch) of the same seed.
  static Rng derive(uint64_t seed, uint64_t stream);

  uint64_t next();
  // Uniform in [0, 1) with 24 random bits (exactly representable as float).
  float uniform();
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n) without modulo bias.
  uint64_t below(uint64_t n);

 private:
  uint64_t s_[4];
};

// PyTorch's default for Conv2d/Linear weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void fillFanInUniform(std::span<float> values, int64_t fanIn, Rng& rng);

// Fisher-Yates permutation of 0..n-1.
std::vector<int64_t> permutation(int64_t n, Rng& rng);

}  // namespace collective::frontend
