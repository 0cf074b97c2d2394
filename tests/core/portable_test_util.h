// Helpers for the tests that run the CUDA kernels' per-element bodies
// (core/backend/portable/) on the host against the CPU kernels.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "cadre/ops/array.h"
#include "cadre/ops/math.h"
#include "cadre/ops/random.h"
#include "cadre/tensor/tensor.h"

namespace cadre::testing {

// The dtypes with arithmetic, for kernels that compute in each.
inline constexpr DType kNumeric[] = {DType::kFloat32, DType::kFloat64, DType::kInt32,
                                     DType::kInt64,   DType::kUInt8,   DType::kBool};

// Where the CPU kernels that the portable rules are compared with run.
inline const Device kCpu = Device::cpu(0);

// What a grid-stride loop does on the GPU, on one host thread.
template <typename F>
void run_on_host(int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) f(i);
}

template <typename T>
T* host_ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// A tensor of `dtype` whose every byte is 0xA5, so that elements a kernel forgets to write
// show up (as a NaN-like float, an odd integer, a non-0/1 bool).
inline Tensor poisoned(const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype, Device::cpu(0));
  if (t.nbytes() > 0) std::memset(t.raw_data(), 0xA5, t.nbytes());
  return t;
}

// Random values of `dtype` (integers in [-20, 20], or [0, 40] for uint8; bools; floats in
// [-4, 4) with a few NaN, infinities and zeros mixed in when `specials`).
inline Tensor random_values(const Shape& shape, DType dtype, uint64_t seed, bool specials = true) {
  Generator gen(seed);
  Tensor u = random_uniform(shape, -4, 4, DType::kFloat64, &gen);
  std::vector<double> v = u.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kBool) {
      v[i] = v[i] > 0;
    } else if (dtype == DType::kUInt8) {
      v[i] = std::floor((v[i] + 4) * 5);
    } else if (dtype == DType::kInt32 || dtype == DType::kInt64) {
      v[i] = std::floor(v[i] * 5);
    } else if (specials && i % 17 == 3) {
      const double kSpecial[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-40, 0.5, 2.5};
      v[i] = kSpecial[(i / 17) % 8];
    }
  }
  return cast(Tensor::from_vector(v, shape), dtype);
}

// Byte-for-byte equality of two contiguous host tensors, reporting the first difference.
inline ::testing::AssertionResult same_bytes(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
    return ::testing::AssertionFailure() << "shapes/dtypes differ: " << a.shape() << a.dtype()
                                         << " vs " << b.shape() << b.dtype();
  }
  Tensor x = a.contiguous(), y = b.contiguous();
  size_t size = dtype_size(a.dtype());
  const auto* p = static_cast<const unsigned char*>(x.raw_data());
  const auto* q = static_cast<const unsigned char*>(y.raw_data());
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (std::memcmp(p + i * size, q + i * size, size) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i << " of " << x.numel()
             << " differs: " << x.reshape({-1}).slice(0, i, i + 1).to_string() << " vs "
             << y.reshape({-1}).slice(0, i, i + 1).to_string();
    }
  }
  return ::testing::AssertionSuccess();
}

// |a - b| <= tolerance * max(1, |b|) elementwise (both float64-convertible).
inline ::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double tolerance) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (x.size() != y.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (!(std::abs(x[i] - y[i]) <= tolerance * std::max(1.0, std::abs(y[i])))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace cadre::testing
