// Float32 2-D convolution gradients (NHWC, [KH, KW, in, out] filters) as matrix products
// over tiles of output pixels whose taps are first copied into rows (im2col), with a fused
// ReLU's gradient applied to each tile on the way, and the filter gradient summed per fixed
// group of images, so that its bits do not depend on the thread count. On two AVX-512 cores
// the products alone are about even with oneDNN 2.6's NHWC backward primitives for the
// Fashion-MNIST CNN's second layer and slower on larger layers; with the ReLU's pass saved
// the CNN's step gains about 0.5 ms. suits() says where they are used.
#pragma once

#include "cadre/tensor/tensor.h"
#include "core/backend/portable/conv_ops.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cpu::conv_gemm {

// Whether products pay for this convolution.
bool suits(const portable::ConvGeometry& g);

// dy is the gradient of the convolution's output after `activation` (kNone or kRelu), y
// that output. Each of dx, dw, db may be undefined.
void backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& y,
              kernels::Activation activation, Tensor& dx, Tensor& dw, Tensor& db,
              const portable::ConvGeometry& g);
// The same from the max pooling that took the convolution's output (grad.tiles()).
void backward(const Tensor& x, const Tensor& w, const kernels::MaxPoolInputGrad& grad,
              kernels::Activation activation, Tensor& dx, Tensor& dw, Tensor& db,
              const portable::ConvGeometry& g);

}  // namespace cadre::backend::cpu::conv_gemm
