// Numerical gradient checks for frontend layers.
//
// The scalar L = sum_i w_i * y_i (w fixed and random) has dL/dy = w, so backward(w) must
// return dL/dx and set dL/dparam; both are compared with central differences of L.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "module.hpp"
#include "rng.hpp"

namespace collective::frontend::testing {

inline Tensor randomTensor(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(shape);
  Rng rng(seed);
  for (float& v : t.span()) v = rng.uniform(lo, hi);
  return t;
}

inline double weightedSum(const Tensor& y, const Tensor& w) {
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(w[i]) * y[i];
  return s;
}

struct GradTolerance {
  double eps = 1e-2;  // finite-difference step
  double atol = 2e-3;
  double rtol = 2e-2;
  int maxChecks = 150;  // entries checked per tensor (spread evenly)
};

// Compares analytic and numerical dL/dv for entries of v, where loss() evaluates L.
inline void compareNumerical(const std::string& what, Tensor& v, const Tensor& analytic,
                             const std::function<double()>& loss, const GradTolerance& tol) {
  ASSERT_EQ(v.numel(), analytic.numel()) << what;
  const int64_t n = v.numel();
  const int64_t stride = std::max<int64_t>(1, n / tol.maxChecks);
  for (int64_t i = 0; i < n; i += stride) {
    const float saved = v[i];
    v[i] = saved + static_cast<float>(tol.eps);
    const double up = loss();
    v[i] = saved - static_cast<float>(tol.eps);
    const double down = loss();
    v[i] = saved;
    const double numeric = (up - down) / (2 * tol.eps);
    const double a = analytic[i];
    EXPECT_LE(std::abs(a - numeric), tol.atol + tol.rtol * std::max(std::abs(a), std::abs(numeric)))
        << what << "[" << i << "]: analytic " << a << ", numerical " << numeric;
  }
}

// Checks the input gradient (when the layer produces one) and every parameter gradient.
inline void checkLayerGradients(Module& m, Tensor x, const GradTolerance& tol = {},
                                uint64_t seed = 99) {
  Shape outShape = m.forward(x).shape();
  const Tensor w = randomTensor(outShape, seed);
  m.forward(x);
  const Tensor dxOut = m.backward(w);
  const Tensor dx = dxOut.defined() ? dxOut.clone() : Tensor();
  std::vector<Tensor> grads;
  for (Param* p : m.parameters()) grads.push_back(p->grad.clone());
  auto loss = [&] { return weightedSum(m.forward(x), w); };
  if (dx.defined()) compareNumerical(m.name() + " input", x, dx, loss, tol);
  auto params = m.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    compareNumerical(params[i]->name, params[i]->value, grads[i], loss, tol);
}

}  // namespace collective::frontend::testing
