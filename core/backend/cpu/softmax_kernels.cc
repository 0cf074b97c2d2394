// CPU softmax, log-softmax and the fused sparse softmax cross-entropy.
#include <cmath>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cpu {
namespace {

int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, cols)); }

// p = softmax(x) over one row of n; returns log(sum(exp(x))), computed stably.
template <typename T>
T softmax_row(const T* x, T* p, int64_t n) {
  T m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  T total = 0;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::exp(x[i] - m);
    total += p[i];
  }
  T inv = T(1) / total;
  for (int64_t i = 0; i < n; ++i) p[i] *= inv;
  return m + std::log(total);
}

void softmax(const Tensor& x, Tensor& y, bool log) {
  visit_float_dtype(x.dtype(), "softmax", [&]<typename T>() {
    int64_t rows = x.shape()[0], cols = x.shape()[1];
    const T* px = typed<T>(x);
    T* py = typed_mut<T>(y);
    parallel_for(0, rows, row_grain(cols), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* xr = px + r * cols;
        T* yr = py + r * cols;
        T lse = softmax_row(xr, yr, cols);
        if (log) {
          for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - lse;
        }
      }
    });
  });
}

void softmax_grad(const Tensor& y, const Tensor& dy, Tensor& dx, bool log) {
  visit_float_dtype(y.dtype(), "softmax_grad", [&]<typename T>() {
    int64_t rows = y.shape()[0], cols = y.shape()[1];
    const T* py = typed<T>(y);
    const T* pg = typed<T>(dy);
    T* pd = typed_mut<T>(dx);
    parallel_for(0, rows, row_grain(cols), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* yr = py + r * cols;
        const T* gr = pg + r * cols;
        T* dr = pd + r * cols;
        if (log) {
          T total = 0;
          for (int64_t c = 0; c < cols; ++c) total += gr[c];
          for (int64_t c = 0; c < cols; ++c) dr[c] = gr[c] - std::exp(yr[c]) * total;
        } else {
          T dot = 0;
          for (int64_t c = 0; c < cols; ++c) dot += gr[c] * yr[c];
          for (int64_t c = 0; c < cols; ++c) dr[c] = yr[c] * (gr[c] - dot);
        }
      }
    });
  });
}

template <typename L>
int64_t label_at(const Tensor& labels, int64_t i) {
  return static_cast<int64_t>(typed<L>(labels)[i]);
}

void sparse_xent(const Tensor& logits, const Tensor& labels, Tensor& loss, Tensor& probs) {
  visit_float_dtype(logits.dtype(), "sparse_softmax_cross_entropy", [&]<typename T>() {
    int64_t rows = logits.shape()[0], cols = logits.shape()[1];
    const T* px = typed<T>(logits);
    T* pl = typed_mut<T>(loss);
    T* pp = typed_mut<T>(probs);
    bool wide = labels.dtype() == DType::kInt64;
    parallel_for(0, rows, row_grain(cols), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* xr = px + r * cols;
        T lse = softmax_row(xr, pp + r * cols, cols);
        int64_t label = wide ? label_at<int64_t>(labels, r) : label_at<int32_t>(labels, r);
        pl[r] = lse - xr[label];
      }
    });
  });
}

void sparse_xent_grad(const Tensor& probs, const Tensor& labels, const Tensor& dloss,
                      Tensor& dlogits) {
  visit_float_dtype(probs.dtype(), "sparse_softmax_cross_entropy_grad", [&]<typename T>() {
    int64_t rows = probs.shape()[0], cols = probs.shape()[1];
    const T* pp = typed<T>(probs);
    const T* pg = typed<T>(dloss);
    T* pd = typed_mut<T>(dlogits);
    bool wide = labels.dtype() == DType::kInt64;
    parallel_for(0, rows, row_grain(cols), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        T g = pg[r];
        const T* pr = pp + r * cols;
        T* dr = pd + r * cols;
        for (int64_t c = 0; c < cols; ++c) dr[c] = g * pr[c];
        int64_t label = wide ? label_at<int64_t>(labels, r) : label_at<int32_t>(labels, r);
        dr[label] -= g;
      }
    });
  });
}

}  // namespace

void register_softmax_kernels() {
  kernels::softmax.set(DeviceType::kCPU, &softmax);
  kernels::softmax_grad.set(DeviceType::kCPU, &softmax_grad);
  kernels::sparse_xent.set(DeviceType::kCPU, &sparse_xent);
  kernels::sparse_xent_grad.set(DeviceType::kCPU, &sparse_xent_grad);
}

}  // namespace cadre::backend::cpu
