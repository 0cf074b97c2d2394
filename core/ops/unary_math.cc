// The unary elementwise ops and activations of cadre/ops/math.h and activation.h, with
// their gradients (the binary ones are in math.cc).
#include <cmath>
#include <numbers>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/activation.h"
#include "cadre/ops/math.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"
#include "core/kernels/elementwise.h"
#include "core/ops/checks.h"
#include "core/ops/kernel_activation.h"

namespace cadre {

using autodiff::BackwardContext;
using kernels::UnaryOp;

namespace {

Tensor unary_raw(UnaryOp op, const char* name, const Tensor& x) {
  checks::defined(name, x);
  DType out_dtype = x.dtype();
  switch (op) {
    case UnaryOp::kNeg:
    case UnaryOp::kAbs:
    case UnaryOp::kSign:
    case UnaryOp::kSquare:
      if (x.dtype() == DType::kBool) {
        throw InvalidArgumentError(str_cat(name, ": not defined for bool tensors"));
      }
      break;
    case UnaryOp::kLogicalNot:
      checks::dtype(name, x, DType::kBool);
      break;
    case UnaryOp::kIsNan:
    case UnaryOp::kIsInf:
    case UnaryOp::kIsFinite:
      checks::floating(name, x);
      out_dtype = DType::kBool;
      break;
    default:
      checks::floating(name, x);
  }
  Tensor out = Tensor::empty(x.shape(), out_dtype, x.device());
  if (x.numel() > 0) kernels::unary.call(x.device(), op, x, out);
  return out;
}

// Gradients of a unary op from its input x, output y and dy.
using UnaryGrad = Tensor (*)(const Tensor& x, const Tensor& y, const Tensor& dy);

Tensor unary_op(UnaryOp op, const char* name, const Tensor& x, UnaryGrad grad) {
  Tensor y = unary_raw(op, name, x);
  if (grad != nullptr && is_floating(x.dtype()) && autodiff::should_record({&x})) {
    autodiff::record(name, {x}, {y}, [x, y, grad](const BackwardContext& c) {
      return std::vector<Gradient>{grad(x, y, c.grad())};
    });
  }
  return y;
}

Tensor activation_op(Activation activation, double alpha, const char* name, const Tensor& x) {
  const kernels::Activation act = kernel_activation(activation);
  checks::defined(name, x);
  checks::floating(name, x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() > 0) kernels::activation.call(x.device(), act, alpha, x, y);
  if (autodiff::should_record({&x})) {
    Tensor saved = kernels::activation_uses_output(act) ? y : x;
    autodiff::record(name, {x}, {y}, [act, alpha, saved](const BackwardContext& c) {
      Tensor dx = Tensor::empty(saved.shape(), saved.dtype(), saved.device());
      if (dx.numel() > 0)
        kernels::activation_grad.call(dx.device(), act, alpha, saved, c.grad(), dx);
      return std::vector<Gradient>{dx};
    });
  }
  return y;
}

}  // namespace

Tensor logical_not(const Tensor& x) { return unary_raw(UnaryOp::kLogicalNot, "logical_not", x); }

Tensor neg(const Tensor& x) {
  return unary_op(UnaryOp::kNeg, "neg", x,
                  [](const Tensor&, const Tensor&, const Tensor& dy) { return neg(dy); });
}
Tensor abs(const Tensor& x) {
  return unary_op(UnaryOp::kAbs, "abs", x, [](const Tensor& x, const Tensor&, const Tensor& dy) {
    return mul(dy, sign(x));
  });
}
Tensor sign(const Tensor& x) { return unary_raw(UnaryOp::kSign, "sign", x); }
Tensor square(const Tensor& x) {
  return unary_op(UnaryOp::kSquare, "square", x,
                  [](const Tensor& x, const Tensor&, const Tensor& dy) {
                    return mul(dy, mul(x, scalar_like(x, 2.0)));
                  });
}
Tensor sqrt(const Tensor& x) {
  return unary_op(UnaryOp::kSqrt, "sqrt", x, [](const Tensor&, const Tensor& y, const Tensor& dy) {
    return div(mul(dy, scalar_like(y, 0.5)), y);
  });
}
Tensor rsqrt(const Tensor& x) {
  return unary_op(UnaryOp::kRsqrt, "rsqrt", x,
                  [](const Tensor&, const Tensor& y, const Tensor& dy) {
                    return mul(dy, mul(scalar_like(y, -0.5), mul(y, square(y))));
                  });
}
Tensor reciprocal(const Tensor& x) {
  return unary_op(
      UnaryOp::kReciprocal, "reciprocal", x,
      [](const Tensor&, const Tensor& y, const Tensor& dy) { return neg(mul(dy, square(y))); });
}
Tensor exp(const Tensor& x) {
  return unary_op(UnaryOp::kExp, "exp", x,
                  [](const Tensor&, const Tensor& y, const Tensor& dy) { return mul(dy, y); });
}
Tensor expm1(const Tensor& x) {
  return unary_op(UnaryOp::kExpm1, "expm1", x,
                  [](const Tensor&, const Tensor& y, const Tensor& dy) {
                    return mul(dy, add(y, scalar_like(y, 1.0)));
                  });
}
Tensor log(const Tensor& x) {
  return unary_op(UnaryOp::kLog, "log", x,
                  [](const Tensor& x, const Tensor&, const Tensor& dy) { return div(dy, x); });
}
Tensor log1p(const Tensor& x) {
  return unary_op(UnaryOp::kLog1p, "log1p", x,
                  [](const Tensor& x, const Tensor&, const Tensor& dy) {
                    return div(dy, add(x, scalar_like(x, 1.0)));
                  });
}
Tensor sin(const Tensor& x) {
  return unary_op(UnaryOp::kSin, "sin", x,
                  [](const Tensor& x, const Tensor&, const Tensor& dy) { return mul(dy, cos(x)); });
}
Tensor cos(const Tensor& x) {
  return unary_op(UnaryOp::kCos, "cos", x, [](const Tensor& x, const Tensor&, const Tensor& dy) {
    return neg(mul(dy, sin(x)));
  });
}
Tensor tan(const Tensor& x) {
  return unary_op(UnaryOp::kTan, "tan", x, [](const Tensor&, const Tensor& y, const Tensor& dy) {
    return mul(dy, add(square(y), scalar_like(y, 1.0)));
  });
}
Tensor erf(const Tensor& x) {
  return unary_op(UnaryOp::kErf, "erf", x, [](const Tensor& x, const Tensor&, const Tensor& dy) {
    return mul(dy, mul(scalar_like(x, 2.0 / std::sqrt(std::numbers::pi)), exp(neg(square(x)))));
  });
}
Tensor floor(const Tensor& x) { return unary_raw(UnaryOp::kFloor, "floor", x); }
Tensor ceil(const Tensor& x) { return unary_raw(UnaryOp::kCeil, "ceil", x); }
Tensor round(const Tensor& x) { return unary_raw(UnaryOp::kRound, "round", x); }
Tensor is_nan(const Tensor& x) { return unary_raw(UnaryOp::kIsNan, "is_nan", x); }
Tensor is_inf(const Tensor& x) { return unary_raw(UnaryOp::kIsInf, "is_inf", x); }
Tensor is_finite(const Tensor& x) { return unary_raw(UnaryOp::kIsFinite, "is_finite", x); }

Tensor relu(const Tensor& x) { return activation_op(Activation::kRelu, 0, "relu", x); }
Tensor leaky_relu(const Tensor& x, double alpha) {
  return activation_op(Activation::kLeakyRelu, alpha, "leaky_relu", x);
}
Tensor elu(const Tensor& x, double alpha) {
  return activation_op(Activation::kElu, alpha, "elu", x);
}
Tensor sigmoid(const Tensor& x) { return activation_op(Activation::kSigmoid, 0, "sigmoid", x); }
Tensor tanh(const Tensor& x) { return activation_op(Activation::kTanh, 0, "tanh", x); }
Tensor gelu(const Tensor& x) { return activation_op(Activation::kGelu, 0, "gelu", x); }
Tensor softplus(const Tensor& x) { return activation_op(Activation::kSoftplus, 0, "softplus", x); }

Tensor activate(const Tensor& x, Activation activation, double alpha) {
  switch (activation) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return relu(x);
    case Activation::kSigmoid:
      return sigmoid(x);
    case Activation::kTanh:
      return tanh(x);
    case Activation::kGelu:
      return gelu(x);
    case Activation::kElu:
      return elu(x, alpha);
    case Activation::kLeakyRelu:
      return leaky_relu(x, alpha);
    case Activation::kSoftplus:
      return softplus(x);
  }
  return x;
}

}  // namespace cadre
