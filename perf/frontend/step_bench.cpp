// Per-step compute of the reference model on one rank, no communication: forward,
// loss, backward and SGD on random data, with a per-layer breakdown. The epoch-time
// budget is this times the steps per epoch (938 at batch 64).
//   frontend_step_bench [batch=64] [steps=50]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "blas.hpp"
#include "loss.hpp"
#include "model.hpp"
#include "rng.hpp"
#include "sgd.hpp"

using namespace collective::frontend;
namespace {

// Thread CPU time: on a shared, oversubscribed machine wall time mostly measures the
// neighbours; CPU time measures our code. The final line gives both.
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  }
};

double ms(double a, double b) { return b - a; }

double wallMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 64;
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 50;
  setBlasThreads(1);
  auto model = makeFashionCnn({});
  Sgd sgd(model->parameters(), {});
  SoftmaxCrossEntropy ce;
  Tensor x({batch, 1, 28, 28});
  Rng rng(1);
  for (float& v : x.span()) v = rng.uniform(-1.0f, 2.0f);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (auto& l : labels) l = static_cast<int32_t>(rng.below(10));

  const size_t n = model->size();
  std::vector<double> fwd(n, 0), bwd(n, 0);
  double lossMs = 0, sgdMs = 0;
  double wallStart = wallMs();
  for (int64_t s = 0; s < steps + 5; ++s) {
    if (s == 5) {  // warm-up done: buffers allocated, caches warm
      std::fill(fwd.begin(), fwd.end(), 0);
      std::fill(bwd.begin(), bwd.end(), 0);
      lossMs = sgdMs = 0;
      wallStart = wallMs();
    }
    Tensor h = x;
    for (size_t i = 0; i < n; ++i) {
      const auto t = Clock::now();
      h = model->layer(i).forward(h);
      fwd[i] += ms(t, Clock::now());
    }
    auto t = Clock::now();
    ce.forward(h, labels);
    h = Tensor();
    Tensor g = ce.backward();
    lossMs += ms(t, Clock::now());
    for (size_t i = n; i-- > 0;) {
      t = Clock::now();
      Tensor in = std::move(g);
      g = model->layer(i).backward(in);
      bwd[i] += ms(t, Clock::now());
    }
    t = Clock::now();
    sgd.step();
    sgdMs += ms(t, Clock::now());
  }
  const double wallPerStep = (wallMs() - wallStart) / steps;
  double total = lossMs + sgdMs;
  std::printf("%-10s %10s %10s   (CPU time per step)\n", "layer", "fwd ms", "bwd ms");
  for (size_t i = 0; i < n; ++i) {
    std::printf("%-10s %10.3f %10.3f\n", model->layer(i).name().c_str(), fwd[i] / steps,
                bwd[i] / steps);
    total += fwd[i] + bwd[i];
  }
  std::printf("%-10s %10.3f\n%-10s %10.3f\n", "loss", lossMs / steps, "sgd", sgdMs / steps);
  const double perStep = total / steps;
  std::printf(
      "batch %lld: %.3f ms/step CPU (%.3f wall), %.0f img/s, %.1f s CPU per "
      "60000-image epoch\n",
      static_cast<long long>(batch), perStep, wallPerStep, batch * 1000.0 / perStep,
      perStep * (60000.0 / batch) / 1000.0);
  return 0;
}
