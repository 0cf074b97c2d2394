// Registration of the CUDA backend's kernels, one function per kernel family (one file
// each), and the few kernel entry points that families share.
#pragma once

#include <cstdint>

#include "cadre/tensor/device.h"
#include "cadre/tensor/dtype.h"
#include "core/kernels/linalg.h"
#include "core/kernels/reduction.h"

namespace cadre::backend::cuda {

void register_elementwise_kernels();
void register_activation_kernels();
void register_reduction_kernels();
void register_matmul_kernels();
void register_softmax_kernels();
void register_conv_kernels();
void register_pool_kernels();
void register_batch_norm_kernels();
void register_index_kernels();
void register_random_kernels();
void register_optimizer_kernels();

// out [outer, inner] = op over the middle axis of contiguous x [outer, n, inner], both in
// `device`'s memory, queued on its compute stream. dtype is x's (out's too, bool for
// kAny/kAll). Sums accumulate in double (int64 for integers) and combine in an order
// fixed by the shape.
void reduce_3d(kernels::ReduceOp op, Device device, DType dtype, const void* x, int64_t outer,
               int64_t n, int64_t inner, void* out);

// The matmul kernel (cuBLASLt or cuBLAS), for other families' products.
void gemm(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
          const kernels::MatmulParams& params);

}  // namespace cadre::backend::cuda
