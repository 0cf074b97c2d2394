// Matrix products.
#pragma once

#include "cadre/ops/activation.h"
#include "cadre/tensor/tensor.h"

namespace cadre {

// a·b for float32/float64 matrices: [M, K]·[K, N] -> [M, N], with optional transposes of
// either operand. Operands of rank >= 3 are batches of matrices whose leading dimensions
// broadcast: [..., M, K]·[..., K, N] -> [..., M, N].
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// The fused dense layer: activation(x·w + bias) with x [..., K], w [K, N], bias [N] or
// undefined. One pass where the backend fuses bias and activation into the product.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias,
              Activation activation = Activation::kNone, double alpha = 0);

}  // namespace cadre
