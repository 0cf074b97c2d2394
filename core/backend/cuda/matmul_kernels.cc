// CUDA matrix products through cuBLAS (row-major operands passed as their column-major
// transposes), with bias and activation applied by an epilogue kernel.
#include <cublas_v2.h>

#include <unordered_map>

#include "core/backend/cuda/cuda_error.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/cuda/launch.h"
#include "core/kernels/linalg.h"

namespace cadre::backend::cuda {
namespace {

cublasHandle_t handle_for(int device) {
  thread_local std::unordered_map<int, cublasHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasHandle_t handle;
  check(cublasCreate(&handle), "cublasCreate");
  return handles.emplace(device, handle).first->second;
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
            const kernels::MatmulParams& p) {
  DeviceGuard guard(out.device());
  cublasHandle_t handle = handle_for(out.device().index);
  int ra = a.rank(), rb = b.rank();
  int64_t batch = ra == 3 ? a.shape()[0] : 1;
  int64_t m = p.transpose_a ? a.shape()[ra - 1] : a.shape()[ra - 2];
  int64_t k = p.transpose_a ? a.shape()[ra - 2] : a.shape()[ra - 1];
  int64_t n = p.transpose_b ? b.shape()[rb - 2] : b.shape()[rb - 1];
  // Row-major C[m, n] = op(A) op(B) is column-major C^T[n, m] = op(B)^T op(A)^T.
  cublasOperation_t op_b = p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_a = p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  int lda = static_cast<int>(p.transpose_a ? m : k);
  int ldb = static_cast<int>(p.transpose_b ? k : n);
  long long stride_a = m * k, stride_b = rb == 2 ? 0 : k * n, stride_c = m * n;
  if (a.dtype() == DType::kFloat32) {
    float one = 1.f, beta = p.accumulate ? 1.f : 0.f;
    check(cublasSgemmStridedBatched(handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                    static_cast<int>(k), &one,
                                    static_cast<const float*>(b.raw_data()), ldb, stride_b,
                                    static_cast<const float*>(a.raw_data()), lda, stride_a, &beta,
                                    static_cast<float*>(out.raw_data()), static_cast<int>(n),
                                    stride_c, static_cast<int>(batch)),
          "cublasSgemmStridedBatched");
  } else if (a.dtype() == DType::kFloat64) {
    double one = 1.0, beta = p.accumulate ? 1.0 : 0.0;
    check(cublasDgemmStridedBatched(handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                    static_cast<int>(k), &one,
                                    static_cast<const double*>(b.raw_data()), ldb, stride_b,
                                    static_cast<const double*>(a.raw_data()), lda, stride_a, &beta,
                                    static_cast<double*>(out.raw_data()), static_cast<int>(n),
                                    stride_c, static_cast<int>(batch)),
          "cublasDgemmStridedBatched");
  } else {
    throw_unsupported_dtype("matmul", a.dtype(), "float32, float64");
  }
  if (bias.defined() || p.activation != kernels::Activation::kNone) {
    bias_activation_epilogue(out, bias, p.activation, p.alpha);
  }
}

}  // namespace

void register_matmul_kernels() { kernels::matmul.set(DeviceType::kGPU, &matmul); }

}  // namespace cadre::backend::cuda
