// Gradient checks against central finite differences, in float64 (the ops' tests in
// tests/core, the Keras layers' in tests/keras).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "cadre/autodiff/tape.h"
#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/random.h"
#include "cadre/ops/reduce.h"

namespace cadre::testing {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

// A random float64 tensor with values in [lo, hi).
inline Tensor random_tensor(const Shape& shape, uint64_t seed, double lo = -1, double hi = 1) {
  Generator g(seed, 7);
  return random_uniform(shape, lo, hi, DType::kFloat64, &g);
}

// Checks d sum(f(inputs) * w) / d inputs against central differences for a fixed random w,
// for every input listed in `check` (all when empty).
inline void expect_gradients_match(const TensorFn& f, std::vector<Tensor> inputs,
                                   std::vector<int> check = {}, double eps = 1e-6,
                                   double tolerance = 1e-6) {
  if (check.empty()) {
    for (size_t i = 0; i < inputs.size(); ++i) check.push_back(static_cast<int>(i));
  }
  Tensor out0;
  {
    NoGradScope no_grad;
    out0 = f(inputs);
  }
  Tensor weights = random_tensor(out0.shape(), 99, 0.5, 1.5);
  auto objective = [&](const std::vector<Tensor>& xs) {
    NoGradScope no_grad;
    return sum(mul(f(xs), weights)).item<double>();
  };
  std::vector<Gradient> analytic;
  {
    GradientTape tape;
    for (const Tensor& x : inputs) tape.watch(x);
    Tensor y = sum(mul(f(inputs), weights));
    std::vector<Tensor> sources;
    for (int i : check) sources.push_back(inputs[i]);
    analytic = tape.gradient(y, sources, UnconnectedGradients::kZero);
  }
  for (size_t c = 0; c < check.size(); ++c) {
    int i = check[c];
    Tensor x = inputs[i].clone();
    std::vector<double> values = x.to_vector<double>();
    std::vector<double> expected(values.size());
    for (size_t k = 0; k < values.size(); ++k) {
      std::vector<double> plus = values, minus = values;
      plus[k] += eps;
      minus[k] -= eps;
      std::vector<Tensor> xs = inputs;
      xs[i] = Tensor::from_vector(plus, x.shape());
      double fp = objective(xs);
      xs[i] = Tensor::from_vector(minus, x.shape());
      double fm = objective(xs);
      expected[k] = (fp - fm) / (2 * eps);
    }
    ASSERT_TRUE(analytic[c].defined()) << "no gradient for input " << i;
    std::vector<double> got = analytic[c].to_dense().to_vector<double>();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t k = 0; k < got.size(); ++k) {
      double scale = std::max(1.0, std::abs(expected[k]));
      EXPECT_NEAR(got[k], expected[k], tolerance * scale)
          << "input " << i << " element " << k << " of shape " << x.shape();
    }
  }
}

}  // namespace cadre::testing
