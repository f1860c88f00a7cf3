// Dense gradient codecs: every element is sent, in fewer bits. The compressed allreduce
// (compressed_allreduce.hpp) only needs encode / decode / decode-and-add on shards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/request.hpp"

namespace coll::engine {

// xorshift32: stochastic rounding needs one cheap uniform number per element; quality
// beyond "no visible bias" does not matter, speed does.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(static_cast<uint32_t>(seed ^ (seed >> 32)) | 1u) {}
  uint32_t next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 17;
    s_ ^= s_ << 5;
    return s_;
  }
  float uniform() { return static_cast<float>(next() >> 8) * (1.0f / 16777216.0f); }  // [0,1)
  uint32_t state() const { return s_; }

 private:
  uint32_t s_;
};

class DenseCodec {
 public:
  virtual ~DenseCodec() = default;
  // Shard boundaries must fall on multiples of this many elements (quantization blocks).
  virtual size_t alignment() const { return 1; }
  virtual size_t encodedBytes(size_t n) const = 0;
  // Encodes n floats into encodedBytes(n) bytes. When roundtrip is non-null it also
  // receives decode(encode(src)), which error feedback needs.
  virtual void encode(const float* src, size_t n, uint8_t* dst, float* roundtrip,
                      Rng& rng) const = 0;
  virtual void decode(const uint8_t* src, size_t n, float* dst) const = 0;
  virtual void decodeAdd(const uint8_t* src, size_t n, float* acc) const = 0;
};

// FP16, BF16 or Int8 (throws for None and TopK, which are not dense codecs).
std::unique_ptr<DenseCodec> makeDenseCodec(const CompressionSpec& spec);
std::unique_ptr<DenseCodec> makeInt8Codec(const CompressionSpec& spec);

}  // namespace coll::engine
