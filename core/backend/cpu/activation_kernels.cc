// CPU activation kernels, their gradients, and the fused bias-and-activation gradient of a
// dense layer.
#include <cmath>
#include <numbers>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/linalg.h"

namespace cadre::backend::cpu {
namespace {

using kernels::Activation;

template <typename T>
T forward(Activation act, T alpha, T x) {
  switch (act) {
    case Activation::kNone: return x;
    case Activation::kRelu: return x > T(0) ? x : T(0);
    case Activation::kSigmoid: return T(1) / (T(1) + std::exp(-x));
    case Activation::kTanh: return std::tanh(x);
    case Activation::kGelu: return T(0.5) * x * (T(1) + std::erf(x * T(std::numbers::sqrt2 / 2)));
    case Activation::kElu: return x > T(0) ? x : alpha * std::expm1(x);
    case Activation::kLeakyRelu: return x > T(0) ? x : alpha * x;
    case Activation::kSoftplus: return std::log1p(std::exp(-std::abs(x))) + (x > T(0) ? x : T(0));
  }
  return x;
}

// d act / d input, from the saved value s (y or x as activation_uses_output says).
template <typename T>
T derivative(Activation act, T alpha, T s) {
  switch (act) {
    case Activation::kNone: return T(1);
    case Activation::kRelu: return s > T(0) ? T(1) : T(0);
    case Activation::kSigmoid: return s * (T(1) - s);
    case Activation::kTanh: return T(1) - s * s;
    case Activation::kElu: return s > T(0) ? T(1) : s + alpha;
    case Activation::kGelu: {
      T cdf = T(0.5) * (T(1) + std::erf(s * T(std::numbers::sqrt2 / 2)));
      T pdf = std::exp(T(-0.5) * s * s) * T(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2);
      return cdf + s * pdf;
    }
    case Activation::kLeakyRelu: return s > T(0) ? T(1) : alpha;
    case Activation::kSoftplus: return T(1) / (T(1) + std::exp(-s));
  }
  return T(1);
}

template <typename T, typename F>
void contiguous_map(const Tensor& x, Tensor& y, F f) {
  const T* px = typed<T>(x);
  T* py = typed_mut<T>(y);
  if (!x.is_contiguous()) {
    StridedLoop<2> loop({&y, &x});
    int64_t sx = loop.inner_stride(1);
    parallel_for(0, y.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      loop.for_each_row(b, e, [&](const std::array<int64_t, 2>& off, int64_t count) {
        for (int64_t i = 0; i < count; ++i) py[off[0] + i] = f(px[off[1] + i * sx]);
      });
    });
    return;
  }
  parallel_for(0, y.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) py[i] = f(px[i]);
  });
}

void activation(Activation act, double alpha, const Tensor& x, Tensor& y) {
  visit_float_dtype(x.dtype(), "activation", [&]<typename T>() {
    T a = static_cast<T>(alpha);
    if (act == Activation::kRelu) {
      contiguous_map<T>(x, y, [](T v) { return v > T(0) ? v : T(0); });
    } else {
      contiguous_map<T>(x, y, [=](T v) { return forward(act, a, v); });
    }
  });
}

template <typename T>
void grad_loop(Activation act, T alpha, const T* s, const T* dy, T* dx, int64_t b, int64_t e) {
  if (act == Activation::kRelu) {
    for (int64_t i = b; i < e; ++i) dx[i] = s[i] > T(0) ? dy[i] : T(0);
  } else if (act == Activation::kNone) {
    for (int64_t i = b; i < e; ++i) dx[i] = dy[i];
  } else {
    for (int64_t i = b; i < e; ++i) dx[i] = dy[i] * derivative(act, alpha, s[i]);
  }
}

void activation_grad(Activation act, double alpha, const Tensor& saved, const Tensor& dy,
                     Tensor& dx) {
  visit_float_dtype(saved.dtype(), "activation_grad", [&]<typename T>() {
    Tensor s = contiguous_raw(saved);
    Tensor g = contiguous_raw(dy);
    const T* ps = typed<T>(s);
    const T* pg = typed<T>(g);
    T* pd = typed_mut<T>(dx);
    T a = static_cast<T>(alpha);
    parallel_for(0, dx.numel(), kElementwiseGrain,
                 [&](int64_t b, int64_t e) { grad_loop(act, a, ps, pg, pd, b, e); });
  });
}

void bias_activation_grad(Activation act, double alpha, const Tensor& y, const Tensor& dy,
                          Tensor& dz, Tensor& db) {
  visit_float_dtype(dy.dtype(), "bias_activation_grad", [&]<typename T>() {
    int64_t rows = dy.shape()[0], cols = dy.shape()[1];
    const T* py = typed<T>(y);
    const T* pg = typed<T>(dy);
    T* pz = typed_mut<T>(dz);
    T* pb = db.defined() ? typed_mut<T>(db) : nullptr;
    T a = static_cast<T>(alpha);
    // Blocks of columns, each summed over every row by one thread: the bias gradient does
    // not depend on the thread count.
    constexpr int64_t kBlock = 64;
    int64_t blocks = (cols + kBlock - 1) / kBlock;
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, rows * kBlock));
    parallel_for(0, blocks, grain, [&](int64_t bb, int64_t be) {
      for (int64_t blk = bb; blk < be; ++blk) {
        int64_t c0 = blk * kBlock, c1 = std::min(cols, c0 + kBlock);
        T sums[kBlock] = {};
        for (int64_t r = 0; r < rows; ++r) {
          int64_t base = r * cols;
          grad_loop(act, a, py + base, pg + base, pz + base, c0, c1);
          if (pb != nullptr) {
            for (int64_t c = c0; c < c1; ++c) sums[c - c0] += pz[base + c];
          }
        }
        if (pb != nullptr) {
          for (int64_t c = c0; c < c1; ++c) pb[c] = sums[c - c0];
        }
      }
    });
  });
}

}  // namespace

void register_activation_kernels() {
  kernels::activation.set(DeviceType::kCPU, &activation);
  kernels::activation_grad.set(DeviceType::kCPU, &activation_grad);
  kernels::bias_activation_grad.set(DeviceType::kCPU, &bias_activation_grad);
}

}  // namespace cadre::backend::cpu
