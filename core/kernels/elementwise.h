// Elementwise kernels. Inputs may be strided views (broadcast inputs have zero strides);
// outputs are contiguous unless stated otherwise. All operands share one device.
#pragma once

#include "cadre/tensor/tensor.h"
#include "core/kernels/registry.h"

namespace cadre::kernels {

enum class UnaryOp {
  kNeg,
  kAbs,
  kSign,
  kSquare,
  kSqrt,
  kRsqrt,
  kReciprocal,
  kExp,
  kExpm1,
  kLog,
  kLog1p,
  kSin,
  kCos,
  kTan,
  kErf,
  kFloor,
  kCeil,
  kRound,
  kLogicalNot,
  kIsNan,
  kIsInf,
  kIsFinite,
};

enum class BinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMaximum,
  kMinimum,
  kSquaredDifference,
  kFloorDiv,
  kMod,
  kEqual,
  kNotEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  kLogicalAnd,
  kLogicalOr,
};

// The activations of cadre/ops/activation.h, alone or fused into matmul and conv2d (the ops
// translate: core/ops/kernel_activation.h). Their gradients are computed from the
// activation's output y (kRelu, kSigmoid, kTanh, kElu) or from its input x (kGelu,
// kLeakyRelu, kSoftplus).
enum class Activation { kNone, kRelu, kSigmoid, kTanh, kGelu, kElu, kLeakyRelu, kSoftplus };

inline bool activation_uses_output(Activation act) {
  return act != Activation::kGelu && act != Activation::kLeakyRelu && act != Activation::kSoftplus;
}

// out (any strides) = value.
using FillFn = void(Tensor& out, double value);
// dst (any strides, same shape and dtype) = src (any strides).
using CopyFn = void(const Tensor& src, Tensor& dst);
// dst (contiguous) = src converted to dst's dtype.
using CastFn = void(const Tensor& src, Tensor& dst);
using UnaryFn = void(UnaryOp op, const Tensor& x, Tensor& out);
// a and b are views broadcast to out's shape.
using BinaryFn = void(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out);
// cond (bool), a and b broadcast to out's shape.
using WhereFn = void(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out);
using ActivationFn = void(Activation act, double alpha, const Tensor& x, Tensor& y);
// dx = dy * act'(.), from `saved` = y or x as activation_uses_output(act) says.
using ActivationGradFn = void(Activation act, double alpha, const Tensor& saved, const Tensor& dy,
                              Tensor& dx);
// out = clamp(x, lo, hi); grad passes dy where lo <= x <= hi.
using ClipFn = void(const Tensor& x, double lo, double hi, Tensor& out);

extern KernelSlot<FillFn> fill;
extern KernelSlot<CopyFn> copy;
extern KernelSlot<CastFn> cast;
extern KernelSlot<UnaryFn> unary;
extern KernelSlot<BinaryFn> binary;
extern KernelSlot<WhereFn> where;
extern KernelSlot<ActivationFn> activation;
extern KernelSlot<ActivationGradFn> activation_grad;
extern KernelSlot<ClipFn> clip;

}  // namespace cadre::kernels
