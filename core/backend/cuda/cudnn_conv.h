// Float32 2-D convolutions through cuDNN, where it takes the problem and gpu_convolution()
// (cadre/runtime/gpu_convolution.h) asks for it. conv_kernels.cu passes its own im2col
// path as `own`: under kAutotune a problem's first call on a device runs both, timed on the
// device, and the faster is kept for the process.
#pragma once

#include <functional>

#include "cadre/tensor/tensor.h"
#include "core/kernels/nn.h"

namespace cadre::backend::cuda {

// y = act(conv(x, w) + bias) through cuDNN: true. False, with nothing queued, where `own`
// is to run instead.
bool cudnn_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                  const kernels::Conv2DParams& p, const std::function<void()>& own);

// dx and dw (each when defined) from dy, the gradient of the convolution's output before
// any activation, through cuDNN: true. False, with nothing queued, as above.
bool cudnn_conv2d_grad(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                       const kernels::Conv2DParams& p, const std::function<void()>& own);

}  // namespace cadre::backend::cuda
