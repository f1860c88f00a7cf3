// Google Benchmark micro-benchmarks of the CPU paths every host collective runs through:
// the reduction kernels (per type and op), the float16/bfloat16 conversions, the dense
// gradient codecs (encode with round trip, decode-and-add, on one cache-sized piece), and the
// per-call cost of a 1-rank all-reduce through the public API (validation, selection,
// dispatch). Not run by `meson test`; run `meson test -C build --benchmark --suite micro`
// or build/perf/micro/micro_bench directly (Google Benchmark flags apply).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "collective.h"
#include "base/reduce.hpp"
#include "engine/compression/codec.hpp"

namespace {

template <typename T>
void reduceKernel(benchmark::State& state, collDataType_t dt, collRedOp_t op) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<T> a(n, T(1)), b(n, T(2)), out(n);
  for (auto _ : state) {
    coll::reduceBuffers(out.data(), a.data(), b.data(), n, dt, op);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // Bytes read and written per call: two inputs, one output.
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(3 * n * sizeof(T)));
}

void BM_ReduceFloatSum(benchmark::State& s) { reduceKernel<float>(s, collFloat32, collSum); }
void BM_ReduceFloatMax(benchmark::State& s) { reduceKernel<float>(s, collFloat32, collMax); }
void BM_ReduceDoubleSum(benchmark::State& s) { reduceKernel<double>(s, collFloat64, collSum); }
void BM_ReduceInt32Prod(benchmark::State& s) { reduceKernel<int32_t>(s, collInt32, collProd); }
void BM_ReduceBf16Sum(benchmark::State& s) { reduceKernel<uint16_t>(s, collBfloat16, collSum); }
void BM_ReduceHalfSum(benchmark::State& s) { reduceKernel<uint16_t>(s, collFloat16, collSum); }
BENCHMARK(BM_ReduceFloatSum)->Range(1 << 10, 1 << 22);
BENCHMARK(BM_ReduceFloatMax)->Range(1 << 10, 1 << 22);
BENCHMARK(BM_ReduceDoubleSum)->Range(1 << 10, 1 << 21);
BENCHMARK(BM_ReduceInt32Prod)->Range(1 << 10, 1 << 22);
BENCHMARK(BM_ReduceBf16Sum)->Range(1 << 10, 1 << 22);
BENCHMARK(BM_ReduceHalfSum)->Range(1 << 10, 1 << 22);

void BM_FloatToBf16(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> in(n, 1.5f);
  std::vector<uint16_t> out(n);
  for (auto _ : state) {
    coll::floatToBf16N(out.data(), in.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}
BENCHMARK(BM_FloatToBf16)->Range(1 << 10, 1 << 20);

void BM_FloatToHalf(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> in(n, 1.5f);
  std::vector<uint16_t> out(n);
  for (auto _ : state) {
    coll::floatToHalfN(out.data(), in.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}
BENCHMARK(BM_FloatToHalf)->Range(1 << 10, 1 << 20);

// One pipeline piece (8192 floats) as the compressed all-reduce encodes it: with the
// round trip that error feedback needs. Items: input floats.
void codecKernel(benchmark::State& state, coll::engine::CompressKind kind, bool stochastic, bool add) {
  coll::engine::CompressionSpec spec;
  spec.kind = kind;
  spec.stochastic = stochastic;
  auto codec = coll::engine::makeDenseCodec(spec);
  const size_t n = 8192;
  std::vector<float> x(n), rt(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 7919) % 1000) * 0.001f - 0.5f;
  std::vector<uint8_t> enc(codec->encodedBytes(n));
  coll::engine::Rng rng(7);
  for (auto _ : state) {
    if (add) codec->decodeAdd(enc.data(), n, rt.data());
    else codec->encode(x.data(), n, enc.data(), rt.data(), rng);
    benchmark::DoNotOptimize(rt.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}
void BM_Int8EncodeStochastic(benchmark::State& s) { codecKernel(s, coll::engine::CompressKind::Int8, true, false); }
void BM_Int8EncodeNearest(benchmark::State& s) { codecKernel(s, coll::engine::CompressKind::Int8, false, false); }
void BM_Int8DecodeAdd(benchmark::State& s) { codecKernel(s, coll::engine::CompressKind::Int8, true, true); }
void BM_Fp16Encode(benchmark::State& s) { codecKernel(s, coll::engine::CompressKind::FP16, false, false); }
BENCHMARK(BM_Int8EncodeStochastic);
BENCHMARK(BM_Int8EncodeNearest);
BENCHMARK(BM_Int8DecodeAdd);
BENCHMARK(BM_Fp16Encode);

// The library's fixed cost per call: a 1-rank communicator moves no bytes between ranks.
void BM_ApiAllReduceOneRank(benchmark::State& state) {
  collUniqueId id;
  collComm_t comm = nullptr;
  if (collGetUniqueId(&id) != collSuccess || collCommInitRank(&comm, 1, id, 0) != collSuccess) {
    state.SkipWithError(collGetLastError(nullptr));
    return;
  }
  float in[2] = {1, 2}, out[2];
  for (auto _ : state) {
    if (collAllReduce(in, out, 2, collFloat32, collSum, comm, nullptr) != collSuccess) {
      state.SkipWithError(collGetLastError(comm));
      break;
    }
    benchmark::DoNotOptimize(out);
  }
  collCommDestroy(comm);
}
BENCHMARK(BM_ApiAllReduceOneRank);

}  // namespace

BENCHMARK_MAIN();
