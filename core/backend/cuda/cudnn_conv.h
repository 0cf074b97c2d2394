// Float32 2-D convolutions through cuDNN, where it takes the problem and gpu_convolution()
// (cadre/runtime/gpu_convolution.h) asks for it. conv_kernels.cu passes its own im2col
// path as `own`. Under kAutotune each problem's first call on a device runs cuDNN and
// `own`, each once to warm up (plans, kernel loading) and then three times between events
// on the compute stream, and keeps the faster by its quickest run for the process. The
// timed runs write the outputs; the kept path then writes them once more, so that a call's
// results are always the kept path's. A path that runs out of memory while timed loses.
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
