// Float32 2-D convolution gradients (NHWC, [KH, KW, in, out] filters) as matrix products
// over tiles of output pixels whose taps are first copied into rows (im2col), with a fused
// ReLU's gradient applied to each tile on the way. oneDNN 2.6's NHWC backward kernels run
// the Fashion-MNIST CNN's second layer at 250 (filters) and 370 (input) GFLOP/s on two
// AVX-512 cores, where these products reach 400; and here the filter gradient is summed per
// fixed group of images, so its bits do not depend on the thread count.
#pragma once

#include "cadre/tensor/tensor.h"
#include "core/backend/portable/conv_ops.h"

namespace cadre::backend::cpu::conv_gemm {

// Whether products pay for this convolution: enough input and output channels to fill a
// vector.
bool suits(const portable::ConvGeometry& g);

// dy is the gradient of the convolution's output after `activation` (kNone or kRelu), y
// that output. Each of dx, dw, db may be undefined.
void backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& y,
              kernels::Activation activation, Tensor& dx, Tensor& dw, Tensor& db,
              const portable::ConvGeometry& g);

}  // namespace cadre::backend::cpu::conv_gemm
