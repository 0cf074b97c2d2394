// CUDA fill and copy for tensors of any strides, and the bias-and-activation epilogue of
// matmul. Fill and copy move elements by size (1, 2, 4 or 8 bytes), so every dtype shares
// one kernel per size.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "core/backend/cuda/cuda_error.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/cuda/launch.h"
#include "core/kernels/elementwise.h"
#include "core/tensor/dtype.h"

namespace cadre::backend::cuda {
namespace {

struct Layout {
  int rank;
  int64_t shape[Shape::kMaxRank];
  int64_t strides[Shape::kMaxRank];
};

Layout layout_of(const Tensor& t) {
  Layout l{};
  l.rank = t.rank();
  for (int d = 0; d < t.rank(); ++d) {
    l.shape[d] = t.shape()[d];
    l.strides[d] = t.strides()[d];
  }
  return l;
}

__device__ int64_t offset_of(const Layout& l, int64_t linear) {
  int64_t offset = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    offset += (linear % l.shape[d]) * l.strides[d];
    linear /= l.shape[d];
  }
  return offset;
}

template <typename W>
__global__ void fill_kernel(W* out, Layout layout, int64_t n, W value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[offset_of(layout, i)] = value;
  }
}

template <typename W>
__global__ void copy_kernel(const W* src, Layout src_layout, W* dst, Layout dst_layout, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[offset_of(dst_layout, i)] = src[offset_of(src_layout, i)];
  }
}

// The bit pattern of `value` stored as `dtype`.
uint64_t bits_of(double value, DType dtype) {
  uint64_t bits = 0;
  auto store = [&bits](auto v) { std::memcpy(&bits, &v, sizeof v); };
  switch (dtype) {
    case DType::kFloat32: store(static_cast<float>(value)); break;
    case DType::kFloat64: store(value); break;
    case DType::kInt32: store(static_cast<int32_t>(value)); break;
    case DType::kInt64: store(static_cast<int64_t>(value)); break;
    case DType::kUInt8: store(static_cast<uint8_t>(value)); break;
    case DType::kBool: store(static_cast<uint8_t>(value != 0)); break;
    case DType::kBFloat16: store(BFloat16(static_cast<float>(value)).bits); break;
    case DType::kFloat16: store(Float16(static_cast<float>(value)).bits); break;
  }
  return bits;
}

template <typename W>
void fill_words(Tensor& out, uint64_t bits) {
  W value;
  std::memcpy(&value, &bits, sizeof value);
  int64_t n = out.numel();
  fill_kernel<W><<<grid_for(n), kBlock>>>(static_cast<W*>(out.raw_data()), layout_of(out), n, value);
  check(cudaGetLastError(), "fill kernel launch");
}

void fill(Tensor& out, double value) {
  DeviceGuard guard(out.device());
  uint64_t bits = bits_of(value, out.dtype());
  visit_storage_word(out.dtype(), [&]<typename W>() { fill_words<W>(out, bits); });
}

template <typename W>
void copy_words(const Tensor& src, Tensor& dst) {
  int64_t n = dst.numel();
  copy_kernel<W><<<grid_for(n), kBlock>>>(static_cast<const W*>(src.raw_data()), layout_of(src),
                                          static_cast<W*>(dst.raw_data()), layout_of(dst), n);
  check(cudaGetLastError(), "copy kernel launch");
}

void copy(const Tensor& src, Tensor& dst) {
  DeviceGuard guard(dst.device());
  if (src.is_contiguous() && dst.is_contiguous()) {
    check(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDeviceToDevice),
          "cudaMemcpyAsync (copy)");
    return;
  }
  visit_storage_word(src.dtype(), [&]<typename W>() { copy_words<W>(src, dst); });
}

template <typename T>
__device__ T activate(kernels::Activation act, T alpha, T z) {
  switch (act) {
    case kernels::Activation::kRelu: return z > T(0) ? z : T(0);
    case kernels::Activation::kSigmoid: return T(1) / (T(1) + exp(-z));
    case kernels::Activation::kTanh: return tanh(z);
    case kernels::Activation::kElu: return z > T(0) ? z : alpha * expm1(z);
    default: return z;
  }
}

template <typename T>
__global__ void epilogue_kernel(T* out, const T* bias, int64_t rows, int64_t cols,
                                kernels::Activation act, T alpha) {
  int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    T z = out[i] + (bias != nullptr ? bias[i % cols] : T(0));
    out[i] = activate(act, alpha, z);
  }
}

}  // namespace

void bias_activation_epilogue(Tensor& out, const Tensor& bias, kernels::Activation act,
                              double alpha) {
  int64_t cols = out.shape()[out.rank() - 1];
  int64_t rows = out.numel() / cols;
  visit_float_dtype(out.dtype(), "matmul", [&]<typename T>() {
    const T* b = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
    epilogue_kernel<T><<<grid_for(rows * cols), kBlock>>>(static_cast<T*>(out.raw_data()), b, rows,
                                                          cols, act, static_cast<T>(alpha));
  });
  check(cudaGetLastError(), "matmul epilogue launch");
}

void register_elementwise_kernels() {
  kernels::fill.set(DeviceType::kGPU, &fill);
  kernels::copy.set(DeviceType::kGPU, &copy);
}

}  // namespace cadre::backend::cuda
