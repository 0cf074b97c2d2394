// CPU activation kernels, their gradients, and the fused bias-and-activation gradient of a
// dense layer.
#include <algorithm>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/backend/portable/op_math.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/linalg.h"

namespace cadre::backend::cpu {
namespace {

using kernels::Activation;

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
      contiguous_map<T>(x, y,
                        [](T v) { return portable::activation_value(Activation::kRelu, T(0), v); });
    } else {
      contiguous_map<T>(x, y, [=](T v) { return portable::activation_value(act, a, v); });
    }
  });
}

// The common activations get loops of their own, the rest the per-element switch.
template <typename T>
void grad_loop(Activation act, T alpha, const T* s, const T* dy, T* dx, int64_t b, int64_t e) {
  auto loop = [&]<Activation kAct>() {
    for (int64_t i = b; i < e; ++i)
      dx[i] = portable::activation_grad_value(kAct, alpha, s[i], dy[i]);
  };
  if (act == Activation::kRelu) {
    loop.template operator()<Activation::kRelu>();
  } else if (act == Activation::kNone) {
    loop.template operator()<Activation::kNone>();
  } else {
    for (int64_t i = b; i < e; ++i)
      dx[i] = portable::activation_grad_value(act, alpha, s[i], dy[i]);
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
