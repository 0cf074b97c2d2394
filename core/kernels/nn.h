// Neural-network kernels: softmax and the fused cross-entropy, convolution, pooling and
// batch normalization (NHWC, channels last).
#pragma once

#include <array>

#include "cadre/tensor/tensor.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/registry.h"

namespace cadre::kernels {

// x, y: contiguous [rows, classes].
using SoftmaxFn = void(const Tensor& x, Tensor& y, bool log);
// dx from y = softmax(x) (or log_softmax when log) and dy.
using SoftmaxGradFn = void(const Tensor& y, const Tensor& dy, Tensor& dx, bool log);
// logits [N, C]; labels int32/int64 [N] already checked to lie in [0, C); loss [N] = -log
// softmax(logits)[label]; probs [N, C] = softmax(logits), saved for the gradient.
using SparseXentFn = void(const Tensor& logits, const Tensor& labels, Tensor& loss, Tensor& probs);
// dlogits[n, c] = dloss[n] * (probs[n, c] - (c == labels[n])).
using SparseXentGradFn = void(const Tensor& probs, const Tensor& labels, const Tensor& dloss,
                              Tensor& dlogits);

struct Conv2DParams {
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 2> dilations{1, 1};
  std::array<int64_t, 2> pad_begin{0, 0};  // rows, columns
  std::array<int64_t, 2> pad_end{0, 0};
  Activation activation = Activation::kNone;  // kNone or kRelu when fused
};
// x [N, H, W, C], w [KH, KW, C, O], bias undefined or [O], y [N, OH, OW, O].
using Conv2DFn = void(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                      const Conv2DParams& params);
// Gradients of the convolution: dy is the gradient of its output y after params.activation
// (y may be undefined when the activation is kNone); dx, dw and db are each computed when
// defined.
using Conv2DGradFn = void(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& y,
                          Tensor& dx, Tensor& dw, Tensor& db, const Conv2DParams& params);

enum class PoolKind { kMax, kAvg };
struct Pool2DParams {
  PoolKind kind = PoolKind::kMax;
  std::array<int64_t, 2> window{2, 2};
  std::array<int64_t, 2> strides{2, 2};
  std::array<int64_t, 2> pad_begin{0, 0};
  std::array<int64_t, 2> pad_end{0, 0};
};
// x [N, H, W, C] -> y [N, OH, OW, C]. For kMax, `argmax` (int32, y's shape) receives the
// flat index within the window of each maximum, for the gradient. Average pooling divides
// by the number of input elements inside the window (padding excluded), as TensorFlow does.
using Pool2DFn = void(const Tensor& x, Tensor& y, Tensor& argmax, const Pool2DParams& params);
using Pool2DGradFn = void(const Tensor& dy, const Tensor& argmax, Tensor& dx,
                          const Pool2DParams& params);

// A convolution and the max pooling after it in one pass, for a convolution whose output
// only the pooling reads: that output is then never written. y and argmax are what Pool2DFn
// gives over the convolution's output (`conv_output`, after params.activation), bit for
// bit. Conv2DMaxPoolSuitsFn says, before the convolution's output is computed, whether the
// backend has such a pass for this convolution; Conv2DMaxPoolFn returns false, computing
// nothing, for a pooling that it does not take.
using Conv2DMaxPoolSuitsFn = bool(const Tensor& x, const Tensor& w, const Conv2DParams& conv);
using Conv2DMaxPoolFn = bool(const Tensor& x, const Tensor& w, const Tensor& bias,
                             const Conv2DParams& conv, const Shape& conv_output,
                             const Pool2DParams& pool, Tensor& y, Tensor& argmax);

// A max pooling's input gradient as its backward pass holds it, before it is built: the
// gradient of the pooling's output, the tap of each maximum and the output itself (all
// contiguous, [N, OH, OW, C]), the pooling's parameters and its input's shape.
struct MaxPoolInputGrad {
  Tensor dy;
  Tensor argmax;
  Tensor pooled;
  Pool2DParams params;
  Shape input_shape;
  // Windows that tile the input (strides equal to the window): each input element then
  // belongs to at most one window.
  bool tiles() const { return params.kind == PoolKind::kMax && params.strides == params.window; }
};
// The convolution's gradients (as Conv2DGradFn) when its output, after params.activation,
// went only into that max pooling: `grad` stands for the output's gradient, read straight
// from the pooling's form. Returns false, computing nothing, where the backend has no such
// path; the caller then builds the dense gradient and calls conv2d_grad.
using Conv2DGradFromMaxPoolFn = bool(const Tensor& x, const Tensor& w, const MaxPoolInputGrad& grad,
                                     Tensor& dx, Tensor& dw, Tensor& db,
                                     const Conv2DParams& params);

// x: contiguous [rows, C]. Training: mean and variance over rows per channel; writes mean
// [C], inv_std [C] = 1/sqrt(var + eps), variance [C] (biased) and y = (x - mean) * inv_std
// * gamma + beta.
using BatchNormTrainFn = void(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                              double epsilon, Tensor& y, Tensor& mean, Tensor& variance,
                              Tensor& inv_std);
// Inference with given statistics.
using BatchNormInferFn = void(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                              const Tensor& mean, const Tensor& variance, double epsilon,
                              Tensor& y);
// Gradients of the training form: dx, dgamma, dbeta.
using BatchNormGradFn = void(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                             const Tensor& mean, const Tensor& inv_std, Tensor& dx, Tensor& dgamma,
                             Tensor& dbeta);

extern KernelSlot<SoftmaxFn> softmax;
extern KernelSlot<SoftmaxGradFn> softmax_grad;
extern KernelSlot<SparseXentFn> sparse_xent;
extern KernelSlot<SparseXentGradFn> sparse_xent_grad;
extern KernelSlot<Conv2DFn> conv2d;
extern KernelSlot<Conv2DGradFn> conv2d_grad;
extern KernelSlot<Conv2DGradFromMaxPoolFn> conv2d_grad_from_max_pool;
extern KernelSlot<Pool2DFn> pool2d;
extern KernelSlot<Pool2DGradFn> pool2d_grad;
extern KernelSlot<Conv2DMaxPoolSuitsFn> conv2d_max_pool_suits;
extern KernelSlot<Conv2DMaxPoolFn> conv2d_max_pool;
extern KernelSlot<BatchNormTrainFn> batch_norm_train;
extern KernelSlot<BatchNormInferFn> batch_norm_infer;
extern KernelSlot<BatchNormGradFn> batch_norm_grad;

}  // namespace cadre::kernels
