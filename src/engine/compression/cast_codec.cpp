// FP16 / BF16 casts: the wire carries 16-bit values; accumulation happens in float on
// the receiving side (see compressed_allreduce.cpp), so precision is lost once per hop
// rather than once per addition.
#include <cstring>

#include "base/error.hpp"
#include "base/reduce.hpp"
#include "engine/compression/codec.hpp"

namespace coll::engine {
namespace {

using ToHalf = void (*)(uint16_t*, const float*, size_t);
using FromHalf = void (*)(float*, const uint16_t*, size_t);

class CastCodec final : public DenseCodec {
 public:
  CastCodec(ToHalf to, FromHalf from) : to_(to), from_(from) {}
  size_t encodedBytes(size_t n) const override { return n * 2; }
  void encode(const float* src, size_t n, uint8_t* dst, float* roundtrip, Rng&) const override {
    auto* h = reinterpret_cast<uint16_t*>(dst);  // encoded shards start 64-byte aligned
    to_(h, src, n);
    if (roundtrip) from_(roundtrip, h, n);
  }
  void decode(const uint8_t* src, size_t n, float* dst) const override {
    from_(dst, reinterpret_cast<const uint16_t*>(src), n);
  }
  void decodeAdd(const uint8_t* src, size_t n, float* acc) const override {
    // Widen through a small stack buffer so the bulk converter stays vectorised.
    constexpr size_t kChunk = 1024;
    float tmp[kChunk];
    const auto* h = reinterpret_cast<const uint16_t*>(src);
    for (size_t off = 0; off < n; off += kChunk) {
      size_t m = n - off < kChunk ? n - off : kChunk;
      from_(tmp, h + off, m);
      for (size_t i = 0; i < m; ++i) acc[off + i] += tmp[i];
    }
  }

 private:
  ToHalf to_;
  FromHalf from_;
};


}  // namespace


std::unique_ptr<DenseCodec> makeDenseCodec(const CompressionSpec& spec) {
  switch (spec.kind) {
    case CompressKind::FP16: return std::make_unique<CastCodec>(floatToHalfN, halfToFloatN);
    case CompressKind::BF16: return std::make_unique<CastCodec>(floatToBf16N, bf16ToFloatN);
    case CompressKind::Int8: return makeInt8Codec(spec);
    default:
      COLL_THROW(collInternalError, "compression ", compressKindName(spec.kind),
                 " is not a dense codec");
  }
}

}  // namespace coll::engine
