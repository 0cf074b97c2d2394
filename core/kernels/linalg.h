// Matrix products, with the bias and activation of a dense layer fused in.
#pragma once

#include "cadre/tensor/tensor.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/registry.h"

namespace cadre::kernels {

struct MatmulParams {
  bool transpose_a = false;  // a is stored as [..., K, M] and read as its transpose
  bool transpose_b = false;  // b is stored as [..., N, K]
  // When true, out += a·b (out's previous contents kept; no bias or activation allowed).
  bool accumulate = false;
  Activation activation = Activation::kNone;
  double alpha = 0;  // the activation's parameter
};

// a: contiguous [M, K] or [B, M, K] (as transposed per params); b: [K, N] or [B, K, N] or
// [K, N] shared by every batch; bias: undefined or [N]; out: contiguous [M, N] or [B, M, N].
// out = act(a·b + bias). float32 and float64. The CPU kernels also take a 2-D a or b whose
// rows lie further apart than their length (views::is_row_strided_matrix).
using MatmulFn = void(const Tensor& a, const Tensor& b, const Tensor& bias, Tensor& out,
                      const MatmulParams& params);
// The backward of y = act(z + bias) over rows: dz = dy * act'(y); db (if defined) = sum of
// dz over rows. y, dy, dz: contiguous [rows, N]; db: [N]. act must use its output.
using BiasActivationGradFn = void(Activation act, double alpha, const Tensor& y, const Tensor& dy,
                                  Tensor& dz, Tensor& db);

extern KernelSlot<MatmulFn> matmul;
extern KernelSlot<BiasActivationGradFn> bias_activation_grad;

}  // namespace cadre::kernels
