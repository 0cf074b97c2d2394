// Elementwise math with NumPy broadcasting, comparisons, activations. Binary ops need
// operands of one dtype and one device, as in TensorFlow (no implicit promotion); a double
// operand becomes a scalar of the tensor's dtype. Comparisons return bool tensors.
#pragma once

#include "cadre/ops/activation.h"
#include "cadre/ops/array.h"
#include "cadre/tensor/tensor.h"

namespace cadre {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor squared_difference(const Tensor& a, const Tensor& b);  // (a - b)^2
Tensor floor_div(const Tensor& a, const Tensor& b);           // not differentiable
Tensor mod(const Tensor& a, const Tensor& b);  // floor modulo, sign of b; not differentiable

Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);  // half to even, as tf.round
Tensor is_nan(const Tensor& x);
Tensor is_inf(const Tensor& x);
Tensor is_finite(const Tensor& x);

Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double alpha = 0.2);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact form, x * Phi(x)
Tensor softplus(const Tensor& x);
// The activation by enum (kNone returns x).
Tensor activate(const Tensor& x, Activation activation, double alpha = 0);

// cond ? a : b elementwise, with broadcasting; cond is bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor clip_by_value(const Tensor& x, double lo, double hi);

// A scalar of x's dtype and device.
Tensor scalar_like(const Tensor& x, double value);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

}  // namespace cadre
