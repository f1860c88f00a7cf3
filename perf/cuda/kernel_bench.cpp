// GPU kernel benchmarks: how close the library's kernels come to what the device's own
// copy engine path achieves, and how long top-k takes (compare with torch_topk.py).
//   cuda_kernel_bench [--size-mib 256] [--iters 20] [--warmup 3] [--device 0]
//                     [--topk-n 25600000] [--topk-density 0.01] [--only copy,reduce,quantize,topk]
// Bandwidth counts bytes read plus bytes written, so a copy of B bytes moves 2B and
// dst = a + b moves 3B; "vs_copy" is the kernel's GB/s over the device-to-device copy's.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/kernels.hpp"
#include "device_buffers.hpp"

namespace {

struct Args {
  size_t bytes = size_t{256} << 20;
  int iters = 20, warmup = 3, device = 0;
  size_t topkN = 25'600'000;
  double density = 0.01;
  std::string only = "copy,reduce,quantize,topk";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("missing value for " + f);
    const char* v = argv[++i];
    if (f == "--size-mib") a.bytes = std::strtoull(v, nullptr, 10) << 20;
    else if (f == "--iters") a.iters = std::atoi(v);
    else if (f == "--warmup") a.warmup = std::atoi(v);
    else if (f == "--device") a.device = std::atoi(v);
    else if (f == "--topk-n") a.topkN = std::strtoull(v, nullptr, 10);
    else if (f == "--topk-density") a.density = std::atof(v);
    else if (f == "--only") a.only = v;
    else throw std::runtime_error("unknown flag " + f);
  }
  if (a.bytes == 0 || a.iters < 1 || a.warmup < 0 || a.topkN == 0 || a.density <= 0 || a.density > 1)
    throw std::runtime_error("bad arguments");
  return a;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Mean milliseconds per call of f, timed with events on stream s after a warm-up.
double timeMs(cudaStream_t s, const Args& a, const std::function<void()>& f) {
  for (int i = 0; i < a.warmup; ++i) f();
  cudaEvent_t t0, t1;
  check(cudaEventCreate(&t0), "cudaEventCreate");
  check(cudaEventCreate(&t1), "cudaEventCreate");
  check(cudaEventRecord(t0, s), "cudaEventRecord");
  for (int i = 0; i < a.iters; ++i) f();
  check(cudaEventRecord(t1, s), "cudaEventRecord");
  check(cudaEventSynchronize(t1), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
  (void)cudaEventDestroy(t0);
  (void)cudaEventDestroy(t1);
  return ms / a.iters;
}

void fillRandom(perf::cuda::DeviceBuffer& b, size_t floats, uint32_t seed) {
  std::vector<float> h(floats);
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  for (auto& x : h) x = g(rng);
  b.upload(h.data(), floats * sizeof(float));
}

void row(const char* name, double bytes, double ms, double copyGBs) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-22s %14.0f %12.1f %9.1f %9.3f\n", name, bytes, ms * 1e3, gbs, copyGBs > 0 ? gbs / copyGBs : 0.0);
}

bool wanted(const Args& a, const char* what) { return a.only.find(what) != std::string::npos; }

void run(const Args& a) {
  check(cudaSetDevice(a.device), "cudaSetDevice");
  std::printf("# %s\n", perf::cuda::describeDevice(a.device).c_str());
  std::printf("# %-20s %14s %12s %9s %9s\n", "kernel", "bytes_moved", "time_us", "GB/s", "vs_copy");
  perf::cuda::Stream stream;
  auto s = static_cast<cudaStream_t>(stream.handle());
  const size_t n = a.bytes / sizeof(float);
  perf::cuda::DeviceBuffer x(a.bytes), y(a.bytes), out(a.bytes);
  fillRandom(x, n, 1);
  fillRandom(y, n, 2);
  // The copy is the yardstick, so it is always measured.
  const double copyMs = timeMs(s, a, [&] {
    check(cudaMemcpyAsync(out.data(), x.data(), a.bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  });
  const double copyGBs = 2.0 * a.bytes / (copyMs * 1e-3) / 1e9;
  row("copy_d2d", 2.0 * a.bytes, copyMs, copyGBs);
  if (wanted(a, "reduce")) {
    const double ms = timeMs(s, a, [&] { coll::cuda::reduce(out.data(), x.data(), y.data(), n, collFloat32, collSum, s); });
    row("reduce_f32_sum", 3.0 * a.bytes, ms, copyGBs);
    const double bf = timeMs(s, a, [&] { coll::cuda::reduce(out.data(), x.data(), y.data(), n * 2, collBfloat16, collSum, s); });
    row("reduce_bf16_sum", 3.0 * a.bytes, bf, copyGBs);
  }
  if (wanted(a, "quantize")) {
    const size_t block = 256, enc = coll::cuda::int8EncodedBytes(n, block);
    perf::cuda::DeviceBuffer q(enc);
    const double qms = timeMs(s, a, [&] {
      coll::cuda::int8Quantize(static_cast<float*>(x.data()), n, block, false, 0, static_cast<uint8_t*>(q.data()), s);
    });
    const double dms = timeMs(s, a, [&] {
      coll::cuda::int8Dequantize(static_cast<uint8_t*>(q.data()), n, block, static_cast<float*>(out.data()), false, s);
    });
    row("int8_quantize", static_cast<double>(a.bytes + enc), qms, copyGBs);
    row("int8_dequantize", static_cast<double>(a.bytes + enc), dms, copyGBs);
    row("int8_roundtrip", 2.0 * (a.bytes + enc), qms + dms, copyGBs);
  }
  if (wanted(a, "topk")) {
    const size_t tn = a.topkN, k = static_cast<size_t>(a.density * static_cast<double>(tn) + 0.5);
    perf::cuda::DeviceBuffer tx(tn * sizeof(float)), idx(k * 4), val(k * 4);
    perf::cuda::DeviceBuffer scratch(coll::cuda::topkScratchBytes(tn, k) + 1);
    fillRandom(tx, tn, 3);
    const double ms = timeMs(s, a, [&] {
      coll::cuda::topk(static_cast<float*>(tx.data()), tn, k, 0, 17, static_cast<uint32_t*>(idx.data()),
                       static_cast<float*>(val.data()), scratch.data(), scratch.bytes(), s);
    });
    // One read of x is the least any top-k can do: the copy-relative figure says how close.
    row("topk", static_cast<double>(tn * sizeof(float)), ms, copyGBs);
    std::printf("topk n=%zu k=%zu ms=%.4f\n", tn, k, ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    if (!perf::cuda::available()) {
      std::fprintf(stderr, "cuda_kernel_bench: no CUDA device\n");
      return 2;
    }
    run(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_kernel_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
