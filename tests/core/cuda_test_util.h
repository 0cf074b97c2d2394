// Helpers for the GPU tests: each kernel runs on gpu:0 and on cpu:0 over the same values
// (and the same views of them), into outputs poisoned beforehand, and the results are
// compared. The tests skip on machines without a GPU.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "cadre/runtime/precision.h"
#include "cadre/tensor/tensor.h"
#include "core/tensor/device_backend.h"
#include "tests/core/portable_test_util.h"

namespace cadre::testing {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (num_gpus() == 0) GTEST_SKIP() << "no GPU on this machine";
  }
};

inline const Device kGpu = Device::gpu(0);
inline const Device kHost = Device::cpu(0);

// One value on both devices.
struct Both {
  Tensor cpu, gpu;
};

inline Both both(const Tensor& host) { return {host, host.to(kGpu)}; }
// The same view (transpose, slice, broadcast...) of both.
inline Both view(const Both& b, const std::function<Tensor(const Tensor&)>& f) {
  return {f(b.cpu), f(b.gpu)};
}
// Outputs whose every byte is 0xA5 on both devices, so that unwritten elements show.
inline Both poisoned_both(const Shape& shape, DType dtype) {
  Tensor host = poisoned(shape, dtype);
  return {host, host.clone().to(kGpu)};
}
inline Both random_both(const Shape& shape, DType dtype, uint64_t seed, bool specials = false) {
  return both(random_values(shape, dtype, seed, specials));
}

// gpu (brought to the host) against cpu: |g - c| <= atol + rtol * |c| elementwise, NaN
// matching NaN (payloads differ between the devices). rtol = atol = 0: exact.
inline ::testing::AssertionResult matches(const Tensor& gpu, const Tensor& cpu, double rtol,
                                          double atol = 0) {
  if (gpu.device() != kGpu) return ::testing::AssertionFailure() << "result on " << gpu.device();
  if (gpu.shape() != cpu.shape() || gpu.dtype() != cpu.dtype()) {
    return ::testing::AssertionFailure()
           << "gpu " << gpu.dtype() << gpu.shape() << " vs cpu " << cpu.dtype() << cpu.shape();
  }
  std::vector<double> g = gpu.to_vector<double>(), c = cpu.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(c[i])) continue;
    if (std::isinf(c[i]) && g[i] == c[i]) continue;
    if (!(std::abs(g[i] - c[i]) <= atol + rtol * std::abs(c[i]))) {
      return ::testing::AssertionFailure()
             << "element " << i << " of " << g.size() << ": gpu " << g[i] << " vs cpu " << c[i];
    }
  }
  return ::testing::AssertionSuccess();
}
inline ::testing::AssertionResult matches(const Both& b, double rtol, double atol = 0) {
  return matches(b.gpu, b.cpu, rtol, atol);
}

// max |gpu - cpu| <= tolerance * max(max |cpu|, min_scale): for products and convolutions,
// whose elements' rounding errors scale with the operands rather than with each result. A
// squashing activation after a product (sigmoid, tanh) shrinks the results but not the
// product's error: pass the product's largest magnitude as min_scale.
inline ::testing::AssertionResult matches_scaled(const Both& b, double tolerance,
                                                 double min_scale = 0) {
  std::vector<double> g = b.gpu.to_vector<double>(), c = b.cpu.to_vector<double>();
  if (g.size() != c.size()) return ::testing::AssertionFailure() << "sizes differ";
  double scale = min_scale, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    scale = std::max(scale, std::abs(c[i]));
    double d = std::abs(g[i] - c[i]);
    if (!(d <= worst)) {  // NaN counts as the worst
      worst = std::isnan(d) ? INFINITY : d;
      at = i;
    }
  }
  if (worst <= tolerance * std::max(scale, 1e-30)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << at << ": gpu " << g[at] << " vs cpu "
                                       << c[at] << " (scale " << scale << ")";
}

// Relative tolerances: a few ulps for elementwise math (CUDA's float functions are within
// 2-4 ulps of the correctly rounded result), more where summation orders differ.
// The largest magnitude of a tensor's elements.
inline double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

inline double ulps(DType dtype, double n = 4) {
  return n * (dtype == DType::kFloat64 ? 2.220446049250313e-16 : 1.1920929e-07);
}

// Restores float32 products when a test ends.
struct PrecisionScope {
  explicit PrecisionScope(Float32Precision p) { set_float32_precision(p); }
  ~PrecisionScope() { set_float32_precision(Float32Precision::kFloat32); }
};

}  // namespace cadre::testing
