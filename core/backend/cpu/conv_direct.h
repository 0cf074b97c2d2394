// CPU 2-D convolution by direct loops, in float64 (what gradient checks compute in): slow
// and exact, the reference the float32 paths of conv_kernels.cc are not.
#pragma once

#include "cadre/tensor/tensor.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cpu {

// y = conv2d(x, w) + bias (bias may be undefined), with p's fused ReLU; float64 tensors.
void conv2d_f64(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                const kernels::Conv2DParams& p);
// The gradients of conv2d from dy (already through the activation): dx, dw and db where
// defined.
void conv2d_grad_f64(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                     Tensor& db, const kernels::Conv2DParams& p);

}  // namespace cadre::backend::cpu
