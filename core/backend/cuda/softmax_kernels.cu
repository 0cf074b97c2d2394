// CUDA softmax, log-softmax and the fused sparse softmax cross-entropy. One warp per row:
// rows are short (classes), and a warp combines its lanes with shuffles, without shared
// memory or block barriers.
#include <cuda_runtime.h>

#include "core/backend/cuda/dispatch.h"
#include "core/backend/cuda/for_each.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/portable/scalar_math.h"
#include "core/backend/portable/softmax_ops.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cuda {
namespace {

namespace p = portable;
constexpr int kWarp = 32;

template <typename T>
__device__ T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__device__ T warp_max(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    T other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

struct WarpRows {
  int lane;
  int64_t first, step;
};

__device__ WarpRows warp_rows() {
  int64_t thread = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  return {static_cast<int>(threadIdx.x % kWarp), thread / kWarp,
          int64_t(gridDim.x) * blockDim.x / kWarp};
}

unsigned grid_for_rows(int64_t rows) {
  constexpr int64_t kWarpsPerBlock = kBlock / kWarp;
  return static_cast<unsigned>(
      std::clamp<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 1, 8192));
}

// The row's maximum and sum of exp(x - max), reduced over the warp (every lane gets them).
template <typename T>
__device__ void row_stats(const T* x, int64_t cols, int lane, T& m, T& total) {
  m = -p::infinity<T>();
  for (int64_t c = lane; c < cols; c += kWarp) m = x[c] > m ? x[c] : m;
  m = warp_max(m);
  total = 0;
  for (int64_t c = lane; c < cols; c += kWarp) total += p::m_exp(x[c] - m);
  total = warp_sum(total);
}

template <typename T>
__global__ void softmax_kernel(const T* x, T* y, int64_t rows, int64_t cols, bool log) {
  WarpRows w = warp_rows();
  for (int64_t r = w.first; r < rows; r += w.step) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    T m, total;
    row_stats(xr, cols, w.lane, m, total);
    if (log) {
      T lse = m + p::m_log(total);
      for (int64_t c = w.lane; c < cols; c += kWarp) yr[c] = xr[c] - lse;
    } else {
      T inv = T(1) / total;
      for (int64_t c = w.lane; c < cols; c += kWarp) yr[c] = p::m_exp(xr[c] - m) * inv;
    }
  }
}

template <typename T>
__global__ void softmax_grad_kernel(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols,
                                    bool log) {
  WarpRows w = warp_rows();
  for (int64_t r = w.first; r < rows; r += w.step) {
    const T* yr = y + r * cols;
    const T* gr = dy + r * cols;
    T* dr = dx + r * cols;
    T acc = 0;
    for (int64_t c = w.lane; c < cols; c += kWarp) acc += log ? gr[c] : gr[c] * yr[c];
    acc = warp_sum(acc);
    for (int64_t c = w.lane; c < cols; c += kWarp) {
      dr[c] = log ? gr[c] - p::m_exp(yr[c]) * acc : yr[c] * (gr[c] - acc);
    }
  }
}

template <typename T, typename L>
__global__ void sparse_xent_kernel(const T* logits, const L* labels, T* loss, T* probs,
                                   int64_t rows, int64_t cols) {
  WarpRows w = warp_rows();
  for (int64_t r = w.first; r < rows; r += w.step) {
    const T* xr = logits + r * cols;
    T* pr = probs + r * cols;
    T m, total;
    row_stats(xr, cols, w.lane, m, total);
    T inv = T(1) / total;
    for (int64_t c = w.lane; c < cols; c += kWarp) pr[c] = p::m_exp(xr[c] - m) * inv;
    if (w.lane == 0) loss[r] = m + p::m_log(total) - xr[static_cast<int64_t>(labels[r])];
  }
}

void softmax(const Tensor& x, Tensor& y, bool log) {
  DeviceGuard guard(y.device());
  visit_float_dtype(x.dtype(), "softmax", [&]<typename T>() {
    int64_t rows = x.shape()[0], cols = x.shape()[1];
    softmax_kernel<T><<<grid_for_rows(rows), kBlock, 0, stream_of(y.device())>>>(
        ptr<T>(x), mut<T>(y), rows, cols, log);
    check(cudaGetLastError(), "softmax kernel launch");
  });
}

void softmax_grad(const Tensor& y, const Tensor& dy, Tensor& dx, bool log) {
  DeviceGuard guard(dx.device());
  visit_float_dtype(y.dtype(), "softmax_grad", [&]<typename T>() {
    int64_t rows = y.shape()[0], cols = y.shape()[1];
    softmax_grad_kernel<T><<<grid_for_rows(rows), kBlock, 0, stream_of(dx.device())>>>(
        ptr<T>(y), ptr<T>(dy), mut<T>(dx), rows, cols, log);
    check(cudaGetLastError(), "softmax_grad kernel launch");
  });
}

void sparse_xent(const Tensor& logits, const Tensor& labels, Tensor& loss, Tensor& probs) {
  DeviceGuard guard(loss.device());
  visit_float_dtype(logits.dtype(), "sparse_softmax_cross_entropy", [&]<typename T>() {
    int64_t rows = logits.shape()[0], cols = logits.shape()[1];
    visit_index(labels, [&](const auto* idx) {
      using L = std::remove_cv_t<std::remove_pointer_t<decltype(idx)>>;
      sparse_xent_kernel<T, L><<<grid_for_rows(rows), kBlock, 0, stream_of(loss.device())>>>(
          ptr<T>(logits), idx, mut<T>(loss), mut<T>(probs), rows, cols);
    });
    check(cudaGetLastError(), "sparse_softmax_cross_entropy kernel launch");
  });
}

void sparse_xent_grad(const Tensor& probs, const Tensor& labels, const Tensor& dloss,
                      Tensor& dlogits) {
  DeviceGuard guard(dlogits.device());
  visit_float_dtype(probs.dtype(), "sparse_softmax_cross_entropy_grad", [&]<typename T>() {
    visit_index(labels, [&](const auto* idx) {
      using L = std::remove_cv_t<std::remove_pointer_t<decltype(idx)>>;
      for_each(dlogits.device(), dlogits.numel(),
               p::XentGradElement<T, L>{ptr<T>(probs), idx, ptr<T>(dloss), mut<T>(dlogits),
                                        probs.shape()[1]},
               "sparse_softmax_cross_entropy_grad");
    });
  });
}

}  // namespace

void register_softmax_kernels() {
  kernels::softmax.set(DeviceType::kGPU, &softmax);
  kernels::softmax_grad.set(DeviceType::kGPU, &softmax_grad);
  kernels::sparse_xent.set(DeviceType::kGPU, &sparse_xent);
  kernels::sparse_xent_grad.set(DeviceType::kGPU, &sparse_xent_grad);
}

}  // namespace cadre::backend::cuda
