// The float32 filter gradient (and forward pass) of a convolution with one input channel
// (the first layer of a grayscale model). oneDNN's backward-weights kernel vectorises over input
// channels: with one, it ran the Fashion-MNIST CNN's first layer at 29 GFLOP/s (3.5 ms of a 24 ms
// step at batch 256), a sixth of what it reaches on the second layer. Here a broadcast input value
// times a vector of output channels is added per tap, the taps' sums held in registers.
#pragma once

#include "cadre/tensor/tensor.h"
#include "core/backend/portable/conv_ops.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cpu::conv_one_channel {

// One input channel, unit strides and dilations.
bool suits(const portable::ConvGeometry& g);

// Where the loops keep the filter or its sums in registers: suits(g), 2x2 and 3x3 filters,
// output channels in multiples of 8. Those run the forward pass too (it writes the output
// once, where oneDNN's kernel for one input channel is memory-bound at about 17 GB/s), with
// or without a pooling, and the filter gradient from a pooling. Where the CPU has AVX-512
// and the output channels come in multiples of 16, they take 16 channels at a time, with
// the same bits.
bool in_registers_suits(const portable::ConvGeometry& g);
// y = x * w (+ bias), then `activation` (kNone or kRelu).
void forward(const Tensor& x, const Tensor& w, const Tensor& bias, kernels::Activation activation,
             Tensor& y, const portable::ConvGeometry& g);

// The forward pass and a max pooling over its output in one (kernels::Conv2DMaxPoolFn):
// where in_registers_suits(g), for windows that tile the output without padding. y and argmax
// are the pooling's.
bool forward_max_pool_suits(const portable::ConvGeometry& g, const kernels::Pool2DParams& pool);
void forward_max_pool(const Tensor& x, const Tensor& w, const Tensor& bias,
                      kernels::Activation activation, const kernels::Pool2DParams& pool, Tensor& y,
                      Tensor& argmax, const portable::ConvGeometry& g);

// dw and db (each may be undefined) from dy, the gradient of the output after `activation`
// (kNone or kRelu; y is that output). Sums per block of images, then the blocks in order:
// the same bits at any thread count.
void filter_grad(const Tensor& x, const Tensor& dy, const Tensor& y, kernels::Activation activation,
                 Tensor& dw, Tensor& db, const portable::ConvGeometry& g);

// The same from the max pooling that took the convolution's output (grad.tiles()), where
// in_registers_suits(g).
void filter_grad(const Tensor& x, const kernels::MaxPoolInputGrad& grad,
                 kernels::Activation activation, Tensor& dw, Tensor& db,
                 const portable::ConvGeometry& g);

// Whether the loops may take 16 channels at a time where the CPU allows (on by default): a
// test compares both widths.
void set_wide_lanes(bool on);

}  // namespace cadre::backend::cpu::conv_one_channel
