// Fused optimizer updates. Each call updates a list of variables (their slots alongside)
// in one pass per variable, so that a backend can do a whole model in one launch.
// All tensors are contiguous float32 or float64; gradient i matches variable i.
//
// copy_out (CPU kernels only; empty on other devices): tensors, or element ranges of them
// (the rows a checkpoint part holds), whose old values a checkpoint's deferred copy still
// needs (core/kernels/copy_out.h). A kernel copies each chunk of such a range out just before
// its rule overwrites that chunk, and any range of a tensor it does not write before it
// returns.
#pragma once

#include <span>

#include "cadre/tensor/tensor.h"
#include "core/kernels/copy_out.h"
#include "core/kernels/registry.h"

namespace cadre::kernels {

struct SgdParams {
  double learning_rate = 0.01;
  double momentum = 0;  // 0: plain SGD, no slot
  bool nesterov = false;
  std::span<const CopyOut> copy_out = {};
};
struct AdamParams {
  double learning_rate = 0.001;  // already bias-corrected: lr * sqrt(1-b2^t) / (1-b1^t)
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;  // added to sqrt(v), scaled like TensorFlow's epsilon-hat
  std::span<const CopyOut> copy_out = {};
};
struct AdagradParams {
  double learning_rate = 0.001;
  double epsilon = 1e-7;
  std::span<const CopyOut> copy_out = {};
};
struct RmsPropParams {
  double learning_rate = 0.001;
  double rho = 0.9;
  double momentum = 0;
  double epsilon = 1e-7;
  bool centered = false;
  std::span<const CopyOut> copy_out = {};
};

// Dense updates. Slots are those the optimizer uses (momentum: accum; Adam: m, v; Adagrad:
// accum; RMSProp: ms, mom, mg).
using SgdFn = void(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> momenta,
                   const SgdParams& p);
using AdamFn = void(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> m,
                    std::span<Tensor> v, const AdamParams& p);
using AdagradFn = void(std::span<Tensor> vars, std::span<const Tensor> grads,
                       std::span<Tensor> accum, const AdagradParams& p);
using RmsPropFn = void(std::span<Tensor> vars, std::span<const Tensor> grads, std::span<Tensor> ms,
                       std::span<Tensor> mom, std::span<Tensor> mg, const RmsPropParams& p);

extern KernelSlot<SgdFn> sgd_update;
extern KernelSlot<AdamFn> adam_update;
extern KernelSlot<AdagradFn> adagrad_update;
extern KernelSlot<RmsPropFn> rmsprop_update;

}  // namespace cadre::kernels
