// CPU batch normalization over the rows of [rows, channels]. Statistics are accumulated in
// double over fixed chunks of rows combined in order, so they do not depend on the thread
// count.
#include <cmath>
#include <vector>

#include "core/backend/cpu/kernels.h"
#include "core/backend/cpu/loops.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cpu {
namespace {

constexpr int64_t kRowChunk = 256;

// Per-channel sums of f(row, channel) over all rows, in double.
template <typename F>
std::vector<double> column_sums(int64_t rows, int64_t channels, F f) {
  int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  std::vector<double> partial(static_cast<size_t>(chunks * channels), 0.0);
  parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t chunk = b; chunk < e; ++chunk) {
      double* acc = partial.data() + chunk * channels;
      int64_t r1 = std::min(rows, (chunk + 1) * kRowChunk);
      for (int64_t r = chunk * kRowChunk; r < r1; ++r) {
        for (int64_t c = 0; c < channels; ++c) acc[c] += f(r, c);
      }
    }
  });
  std::vector<double> total(static_cast<size_t>(channels), 0.0);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    for (int64_t c = 0; c < channels; ++c) total[c] += partial[chunk * channels + c];
  }
  return total;
}

// y = x * scale + shift per channel, over every row.
template <typename T>
void apply_scale_shift(const T* x, const std::vector<T>& scale, const std::vector<T>& shift,
                       int64_t rows, int64_t channels, T* y) {
  parallel_for(0, rows, kRowChunk, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      for (int64_t c = 0; c < channels; ++c) {
        y[r * channels + c] = x[r * channels + c] * scale[c] + shift[c];
      }
    }
  });
}

template <typename T>
void train(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon, Tensor& y,
           Tensor& mean, Tensor& variance, Tensor& inv_std) {
  int64_t rows = x.shape()[0], channels = x.shape()[1];
  const T* px = typed<T>(x);
  std::vector<double> sums = column_sums(
      rows, channels, [&](int64_t r, int64_t c) { return double(px[r * channels + c]); });
  std::vector<double> mu(channels);
  for (int64_t c = 0; c < channels; ++c) mu[c] = sums[c] / static_cast<double>(rows);
  std::vector<double> squares = column_sums(rows, channels, [&](int64_t r, int64_t c) {
    double d = double(px[r * channels + c]) - mu[c];
    return d * d;
  });
  T* pm = typed_mut<T>(mean);
  T* pv = typed_mut<T>(variance);
  T* pi = typed_mut<T>(inv_std);
  const T* pg = typed<T>(gamma);
  const T* pb = typed<T>(beta);
  std::vector<T> scale(channels), shift(channels);
  for (int64_t c = 0; c < channels; ++c) {
    double var = squares[c] / static_cast<double>(rows);
    double inv = 1.0 / std::sqrt(var + epsilon);
    pm[c] = static_cast<T>(mu[c]);
    pv[c] = static_cast<T>(var);
    pi[c] = static_cast<T>(inv);
    scale[c] = static_cast<T>(inv * double(pg[c]));
    shift[c] = static_cast<T>(double(pb[c]) - mu[c] * inv * double(pg[c]));
  }
  apply_scale_shift(px, scale, shift, rows, channels, typed_mut<T>(y));
}

template <typename T>
void infer(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
           const Tensor& variance, double epsilon, Tensor& y) {
  int64_t rows = x.shape()[0], channels = x.shape()[1];
  const T* px = typed<T>(x);
  std::vector<T> scale(channels), shift(channels);
  for (int64_t c = 0; c < channels; ++c) {
    double inv = 1.0 / std::sqrt(double(typed<T>(variance)[c]) + epsilon);
    scale[c] = static_cast<T>(inv * double(typed<T>(gamma)[c]));
    shift[c] =
        static_cast<T>(double(typed<T>(beta)[c]) - double(typed<T>(mean)[c]) * double(scale[c]));
  }
  apply_scale_shift(px, scale, shift, rows, channels, typed_mut<T>(y));
}

template <typename T>
void grad(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
          const Tensor& inv_std, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  int64_t rows = x.shape()[0], channels = x.shape()[1];
  const T* px = typed<T>(x);
  const T* pg = typed<T>(dy);
  const T* pm = typed<T>(mean);
  const T* pi = typed<T>(inv_std);
  std::vector<double> sum_dy = column_sums(
      rows, channels, [&](int64_t r, int64_t c) { return double(pg[r * channels + c]); });
  std::vector<double> sum_dy_xhat = column_sums(rows, channels, [&](int64_t r, int64_t c) {
    return double(pg[r * channels + c]) * (double(px[r * channels + c]) - pm[c]) * pi[c];
  });
  T* pdg = typed_mut<T>(dgamma);
  T* pdb = typed_mut<T>(dbeta);
  std::vector<T> a(channels), bterm(channels), cterm(channels);
  double m = static_cast<double>(rows);
  for (int64_t c = 0; c < channels; ++c) {
    pdg[c] = static_cast<T>(sum_dy_xhat[c]);
    pdb[c] = static_cast<T>(sum_dy[c]);
    // dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat))
    double k = double(typed<T>(gamma)[c]) * pi[c];
    a[c] = static_cast<T>(k);
    bterm[c] = static_cast<T>(k * sum_dy[c] / m);
    cterm[c] = static_cast<T>(k * sum_dy_xhat[c] / m * pi[c]);
  }
  T* pd = typed_mut<T>(dx);
  parallel_for(0, rows, kRowChunk, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      for (int64_t c = 0; c < channels; ++c) {
        int64_t i = r * channels + c;
        pd[i] = a[c] * pg[i] - bterm[c] - cterm[c] * (px[i] - pm[c]);
      }
    }
  });
}

void batch_norm_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon,
                      Tensor& y, Tensor& mean, Tensor& variance, Tensor& inv_std) {
  visit_float_dtype(x.dtype(), "batch_norm", [&]<typename T>() {
    train<T>(x, gamma, beta, epsilon, y, mean, variance, inv_std);
  });
}

void batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                      const Tensor& variance, double epsilon, Tensor& y) {
  visit_float_dtype(x.dtype(), "batch_norm",
                    [&]<typename T>() { infer<T>(x, gamma, beta, mean, variance, epsilon, y); });
}

void batch_norm_grad(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                     const Tensor& inv_std, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  visit_float_dtype(x.dtype(), "batch_norm_grad",
                    [&]<typename T>() { grad<T>(x, dy, gamma, mean, inv_std, dx, dgamma, dbeta); });
}

}  // namespace

void register_batch_norm_kernels() {
  kernels::batch_norm_train.set(DeviceType::kCPU, &batch_norm_train);
  kernels::batch_norm_infer.set(DeviceType::kCPU, &batch_norm_infer);
  kernels::batch_norm_grad.set(DeviceType::kCPU, &batch_norm_grad);
}

}  // namespace cadre::backend::cpu
