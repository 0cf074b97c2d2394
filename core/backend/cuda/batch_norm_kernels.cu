// CUDA batch normalization over the rows of [rows, channels], with the CPU backend's
// arithmetic (core/backend/cpu/batch_norm_kernels.cc): per-channel statistics accumulate
// in double, first over fixed chunks of rows (one block column each), then over the chunks
// in order, so the result does not depend on scheduling; the elementwise passes use the
// per-channel scale and shift in the tensor's type.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/backend/cuda/for_each.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/portable/scalar_math.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cuda {
namespace {

constexpr int kLanes = 32;  // channels per block
constexpr int kRowsPerBlock = kBlock / kLanes;
constexpr int64_t kMaxChunks = 512;

struct Sums {
  double a = 0, b = 0;
};

// partial[chunk * channels + c] = the sums of f(r, c) over the rows of the chunk.
template <typename F>
__global__ void column_sums_kernel(F f, int64_t rows, int64_t channels, int64_t chunk_rows,
                                   Sums* partial) {
  __shared__ Sums shared[kRowsPerBlock][kLanes];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t c = blockIdx.x * int64_t(kLanes) + tx;
  int64_t r0 = blockIdx.y * chunk_rows;
  int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  Sums acc;
  if (c < channels) {
    for (int64_t r = r0 + ty; r < r1; r += kRowsPerBlock) {
      Sums v = f(r, c);
      acc.a += v.a;
      acc.b += v.b;
    }
  }
  shared[ty][tx] = acc;
  __syncthreads();
  for (int s = kRowsPerBlock / 2; s > 0; s /= 2) {
    if (ty < s) {
      shared[ty][tx].a += shared[ty + s][tx].a;
      shared[ty][tx].b += shared[ty + s][tx].b;
    }
    __syncthreads();
  }
  if (ty == 0 && c < channels) partial[blockIdx.y * channels + c] = shared[0][tx];
}

// Column sums of f over [rows, channels] into partials; returns the number of chunks.
template <typename F>
int64_t column_sums(Device device, const F& f, int64_t rows, int64_t channels, Sums* partial,
                    int64_t chunks) {
  int64_t chunk_rows = (rows + chunks - 1) / chunks;
  dim3 grid(static_cast<unsigned>((channels + kLanes - 1) / kLanes), static_cast<unsigned>(chunks));
  column_sums_kernel<<<grid, dim3(kLanes, kRowsPerBlock), 0, stream_of(device)>>>(
      f, rows, channels, chunk_rows, partial);
  check(cudaGetLastError(), "batch_norm statistics launch");
  return chunks;
}

int64_t chunks_for(int64_t rows) { return std::clamp<int64_t>((rows + 255) / 256, 1, kMaxChunks); }

__device__ Sums total_of(const Sums* partial, int64_t chunks, int64_t channels, int64_t c) {
  Sums t;
  for (int64_t k = 0; k < chunks; ++k) {
    t.a += partial[k * channels + c].a;
    t.b += partial[k * channels + c].b;
  }
  return t;
}

template <typename T>
struct XSum {
  const T* x;
  int64_t channels;
  __device__ Sums operator()(int64_t r, int64_t c) const {
    return {double(x[r * channels + c]), 0};
  }
};

template <typename T>
struct SquaredDeviation {
  const T* x;
  const double* mu;
  int64_t channels;
  __device__ Sums operator()(int64_t r, int64_t c) const {
    double d = double(x[r * channels + c]) - mu[c];
    return {d * d, 0};
  }
};

// sum(dy) and sum(dy * xhat) per channel.
template <typename T>
struct GradSums {
  const T* x;
  const T* dy;
  const T* mean;
  const T* inv_std;
  int64_t channels;
  __device__ Sums operator()(int64_t r, int64_t c) const {
    double g = double(dy[r * channels + c]);
    return {g, g * (double(x[r * channels + c]) - mean[c]) * inv_std[c]};
  }
};

// mu[c] = mean over rows (double).
__global__ void mean_kernel(const Sums* partial, int64_t chunks, int64_t channels, int64_t rows,
                            double* mu) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c < channels) mu[c] = total_of(partial, chunks, channels, c).a / double(rows);
}

template <typename T>
__global__ void train_finalize_kernel(const Sums* partial, int64_t chunks, int64_t channels,
                                      int64_t rows, const double* mu, const T* gamma, const T* beta,
                                      double epsilon, T* mean, T* variance, T* inv_std, T* scale,
                                      T* shift) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  double var = total_of(partial, chunks, channels, c).a / double(rows);
  double inv = 1.0 / ::sqrt(var + epsilon);
  mean[c] = static_cast<T>(mu[c]);
  variance[c] = static_cast<T>(var);
  inv_std[c] = static_cast<T>(inv);
  scale[c] = static_cast<T>(inv * double(gamma[c]));
  shift[c] = static_cast<T>(double(beta[c]) - mu[c] * inv * double(gamma[c]));
}

template <typename T>
__global__ void infer_scale_kernel(const T* gamma, const T* beta, const T* mean, const T* variance,
                                   double epsilon, int64_t channels, T* scale, T* shift) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  double inv = 1.0 / ::sqrt(double(variance[c]) + epsilon);
  scale[c] = static_cast<T>(inv * double(gamma[c]));
  shift[c] = static_cast<T>(double(beta[c]) - double(mean[c]) * double(scale[c]));
}

template <typename T>
__global__ void grad_finalize_kernel(const Sums* partial, int64_t chunks, int64_t channels,
                                     int64_t rows, const T* gamma, const T* inv_std, T* dgamma,
                                     T* dbeta, T* a, T* bterm, T* cterm) {
  int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  Sums t = total_of(partial, chunks, channels, c);
  double m = double(rows);
  dgamma[c] = static_cast<T>(t.b);
  dbeta[c] = static_cast<T>(t.a);
  double k = double(gamma[c]) * inv_std[c];
  a[c] = static_cast<T>(k);
  bterm[c] = static_cast<T>(k * t.a / m);
  cterm[c] = static_cast<T>(k * t.b / m * inv_std[c]);
}

template <typename T>
struct ScaleShift {
  const T* x;
  const T* scale;
  const T* shift;
  T* y;
  int64_t channels;
  __device__ void operator()(int64_t i) const {
    int64_t c = i % channels;
    y[i] = x[i] * scale[c] + shift[c];
  }
};

template <typename T>
struct GradApply {
  const T* x;
  const T* dy;
  const T* mean;
  const T* a;
  const T* bterm;
  const T* cterm;
  T* dx;
  int64_t channels;
  __device__ void operator()(int64_t i) const {
    int64_t c = i % channels;
    dx[i] = a[c] * dy[i] - bterm[c] - cterm[c] * (x[i] - mean[c]);
  }
};

unsigned channel_grid(int64_t channels) {
  return static_cast<unsigned>((channels + kBlock - 1) / kBlock);
}

// Device scratch of `count` elements of T, freed (stream-ordered) with the tensor.
template <typename T>
Tensor scratch(Device device, int64_t count) {
  return Tensor::empty(Shape{count * int64_t(sizeof(T))}, DType::kUInt8, device);
}

template <typename T>
void train(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon, Tensor& y,
           Tensor& mean, Tensor& variance, Tensor& inv_std) {
  Device device = y.device();
  int64_t rows = x.shape()[0], channels = x.shape()[1];
  int64_t chunks = chunks_for(rows);
  Tensor partial = scratch<Sums>(device, chunks * channels);
  Tensor mu = scratch<double>(device, channels);
  Tensor coefficients = scratch<T>(device, 2 * channels);
  T* scale = mut<T>(coefficients);
  T* shift = scale + channels;
  cudaStream_t stream = stream_of(device);
  column_sums(device, XSum<T>{ptr<T>(x), channels}, rows, channels, mut<Sums>(partial), chunks);
  mean_kernel<<<channel_grid(channels), kBlock, 0, stream>>>(mut<Sums>(partial), chunks, channels,
                                                             rows, mut<double>(mu));
  check(cudaGetLastError(), "batch_norm mean launch");
  column_sums(device, SquaredDeviation<T>{ptr<T>(x), mut<double>(mu), channels}, rows, channels,
              mut<Sums>(partial), chunks);
  train_finalize_kernel<T><<<channel_grid(channels), kBlock, 0, stream>>>(
      mut<Sums>(partial), chunks, channels, rows, mut<double>(mu), ptr<T>(gamma), ptr<T>(beta),
      epsilon, mut<T>(mean), mut<T>(variance), mut<T>(inv_std), scale, shift);
  check(cudaGetLastError(), "batch_norm finalize launch");
  for_each(device, x.numel(), ScaleShift<T>{ptr<T>(x), scale, shift, mut<T>(y), channels},
           "batch_norm");
}

template <typename T>
void infer(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
           const Tensor& variance, double epsilon, Tensor& y) {
  Device device = y.device();
  int64_t channels = x.shape()[1];
  Tensor coefficients = scratch<T>(device, 2 * channels);
  T* scale = mut<T>(coefficients);
  T* shift = scale + channels;
  infer_scale_kernel<T><<<channel_grid(channels), kBlock, 0, stream_of(device)>>>(
      ptr<T>(gamma), ptr<T>(beta), ptr<T>(mean), ptr<T>(variance), epsilon, channels, scale, shift);
  check(cudaGetLastError(), "batch_norm (inference) launch");
  for_each(device, x.numel(), ScaleShift<T>{ptr<T>(x), scale, shift, mut<T>(y), channels},
           "batch_norm (inference)");
}

template <typename T>
void grad(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
          const Tensor& inv_std, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  Device device = dx.device();
  int64_t rows = x.shape()[0], channels = x.shape()[1];
  int64_t chunks = chunks_for(rows);
  Tensor partial = scratch<Sums>(device, chunks * channels);
  Tensor coefficients = scratch<T>(device, 3 * channels);
  T* a = mut<T>(coefficients);
  T* bterm = a + channels;
  T* cterm = bterm + channels;
  column_sums(device, GradSums<T>{ptr<T>(x), ptr<T>(dy), ptr<T>(mean), ptr<T>(inv_std), channels},
              rows, channels, mut<Sums>(partial), chunks);
  grad_finalize_kernel<T><<<channel_grid(channels), kBlock, 0, stream_of(device)>>>(
      mut<Sums>(partial), chunks, channels, rows, ptr<T>(gamma), ptr<T>(inv_std), mut<T>(dgamma),
      mut<T>(dbeta), a, bterm, cterm);
  check(cudaGetLastError(), "batch_norm_grad finalize launch");
  for_each(device, x.numel(),
           GradApply<T>{ptr<T>(x), ptr<T>(dy), ptr<T>(mean), a, bterm, cterm, mut<T>(dx), channels},
           "batch_norm_grad");
}

void batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon,
                      Tensor& y, Tensor& mean, Tensor& variance, Tensor& inv_std) {
  DeviceGuard guard(y.device());
  visit_float_dtype(x.dtype(), "batch_norm", [&]<typename T>() {
    train<T>(x, gamma, beta, epsilon, y, mean, variance, inv_std);
  });
}

void batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                      const Tensor& variance, double epsilon, Tensor& y) {
  DeviceGuard guard(y.device());
  visit_float_dtype(x.dtype(), "batch_norm",
                    [&]<typename T>() { infer<T>(x, gamma, beta, mean, variance, epsilon, y); });
}

void batch_norm_grad(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                     const Tensor& inv_std, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  DeviceGuard guard(dx.device());
  visit_float_dtype(x.dtype(), "batch_norm_grad",
                    [&]<typename T>() { grad<T>(x, dy, gamma, mean, inv_std, dx, dgamma, dbeta); });
}

}  // namespace

void register_batch_norm_kernels() {
  kernels::batch_norm_train.set(DeviceType::kGPU, &batch_norm_train);
  kernels::batch_norm_infer.set(DeviceType::kGPU, &batch_norm_infer);
  kernels::batch_norm_grad.set(DeviceType::kGPU, &batch_norm_grad);
}

}  // namespace cadre::backend::cuda
