#include "cadre/ops/math.h"

#include <cmath>
#include <numbers>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"
#include "core/kernels/elementwise.h"
#include "core/ops/checks.h"
#include "core/ops/kernel_activation.h"
#include "core/tensor/views.h"

namespace cadre {

using autodiff::BackwardContext;
using kernels::BinaryOp;
using kernels::UnaryOp;

namespace {

bool is_comparison(BinaryOp op) {
  switch (op) {
    case BinaryOp::kEqual: case BinaryOp::kNotEqual: case BinaryOp::kLess:
    case BinaryOp::kLessEqual: case BinaryOp::kGreater: case BinaryOp::kGreaterEqual:
    case BinaryOp::kLogicalAnd: case BinaryOp::kLogicalOr:
      return true;
    default:
      return false;
  }
}

Tensor binary_raw(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  checks::defined(name, a, "first operand");
  checks::defined(name, b, "second operand");
  checks::same_dtype(name, a, b);
  checks::same_device(name, a, b);
  bool logical = op == BinaryOp::kLogicalAnd || op == BinaryOp::kLogicalOr;
  if (logical && a.dtype() != DType::kBool) {
    throw InvalidArgumentError(str_cat(name, ": expected bool operands, got ", a.dtype()));
  }
  if (!logical && !is_comparison(op) && a.dtype() == DType::kBool) {
    throw InvalidArgumentError(str_cat(name, ": arithmetic on bool tensors; cast them first"));
  }
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, is_comparison(op) ? DType::kBool : a.dtype(), a.device());
  if (shape.num_elements() > 0) {
    kernels::binary.call(a.device(), op, views::broadcast(a, shape, name),
                         views::broadcast(b, shape, name), out);
  }
  return out;
}

Tensor unary_raw(UnaryOp op, const char* name, const Tensor& x) {
  checks::defined(name, x);
  DType out_dtype = x.dtype();
  switch (op) {
    case UnaryOp::kNeg: case UnaryOp::kAbs: case UnaryOp::kSign: case UnaryOp::kSquare:
      if (x.dtype() == DType::kBool) {
        throw InvalidArgumentError(str_cat(name, ": not defined for bool tensors"));
      }
      break;
    case UnaryOp::kLogicalNot:
      checks::dtype(name, x, DType::kBool);
      break;
    case UnaryOp::kIsNan: case UnaryOp::kIsInf: case UnaryOp::kIsFinite:
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

// What a binary op's backward function may read.
struct BinarySaved {
  Tensor a, b, out;  // undefined unless the op asked to keep them
  Shape a_shape, b_shape;
};
enum class Keep { kShapes, kInputs, kInputsAndOutput };
using BinaryGrad = std::vector<Gradient> (*)(const BinarySaved& s, const BackwardContext& c);

Tensor binary_op(BinaryOp op, const char* name, const Tensor& a, const Tensor& b,
                 BinaryGrad grad, Keep keep = Keep::kInputs) {
  Tensor out = binary_raw(op, name, a, b);
  if (grad != nullptr && is_floating(a.dtype()) && autodiff::should_record({&a, &b})) {
    BinarySaved saved{Tensor(), Tensor(), Tensor(), a.shape(), b.shape()};
    if (keep != Keep::kShapes) {
      saved.a = a;
      saved.b = b;
    }
    if (keep == Keep::kInputsAndOutput) saved.out = out;
    autodiff::record(name, {a, b}, {out}, [saved = std::move(saved), grad](
                                              const BackwardContext& c) { return grad(saved, c); });
  }
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

Gradient grad_a(const BackwardContext& c, const BinarySaved& s, const Tensor& g) {
  return c.needs_grad(0) ? Gradient(reduce_to_shape(g, s.a_shape)) : Gradient();
}
Gradient grad_b(const BackwardContext& c, const BinarySaved& s, const Tensor& g) {
  return c.needs_grad(1) ? Gradient(reduce_to_shape(g, s.b_shape)) : Gradient();
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

Tensor scalar_like(const Tensor& x, double value) {
  return Tensor::full(Shape{}, value, x.dtype(), x.device());
}

Tensor add(const Tensor& a, const Tensor& b) {
  return binary_op(
      BinaryOp::kAdd, "add", a, b,
      [](const BinarySaved& s, const BackwardContext& c) {
        return std::vector<Gradient>{grad_a(c, s, c.grad()), grad_b(c, s, c.grad())};
      },
      Keep::kShapes);
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary_op(
      BinaryOp::kSub, "sub", a, b,
      [](const BinarySaved& s, const BackwardContext& c) {
        return std::vector<Gradient>{grad_a(c, s, c.grad()),
                                     c.needs_grad(1) ? grad_b(c, s, neg(c.grad())) : Gradient()};
      },
      Keep::kShapes);
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::kMul, "mul", a, b,
                   [](const BinarySaved& s, const BackwardContext& c) {
                     return std::vector<Gradient>{
                         c.needs_grad(0) ? grad_a(c, s, mul(c.grad(), s.b)) : Gradient(),
                         c.needs_grad(1) ? grad_b(c, s, mul(c.grad(), s.a)) : Gradient()};
                   });
}

Tensor div(const Tensor& a, const Tensor& b) {
  return binary_op(
      BinaryOp::kDiv, "div", a, b,
      [](const BinarySaved& s, const BackwardContext& c) {
        return std::vector<Gradient>{
            c.needs_grad(0) ? grad_a(c, s, div(c.grad(), s.b)) : Gradient(),
            c.needs_grad(1) ? grad_b(c, s, neg(div(mul(c.grad(), s.out), s.b))) : Gradient()};
      },
      Keep::kInputsAndOutput);
}

Tensor pow(const Tensor& a, const Tensor& b) {
  return binary_op(
      BinaryOp::kPow, "pow", a, b,
      [](const BinarySaved& s, const BackwardContext& c) {
        Gradient ga, gb;
        if (c.needs_grad(0)) {
          ga = grad_a(c, s, mul(c.grad(), mul(s.b, pow(s.a, sub(s.b, scalar_like(s.b, 1.0))))));
        }
        if (c.needs_grad(1)) {
          // d/db a^b = a^b log a, taken as 0 where a <= 0 (as TensorFlow does).
          Tensor positive = greater(s.a, scalar_like(s.a, 0.0));
          Tensor safe_log =
              where(positive, log(where(positive, s.a, ones_like(s.a))), zeros_like(s.a));
          gb = grad_b(c, s, mul(c.grad(), mul(s.out, safe_log)));
        }
        return std::vector<Gradient>{ga, gb};
      },
      Keep::kInputsAndOutput);
}

// The gradient of maximum/minimum goes to a where `a_wins`, else to b.
std::vector<Gradient> select_grad(const Tensor& a_wins, const BinarySaved& s,
                                  const BackwardContext& c) {
  Tensor to_a = cast(a_wins, c.grad().dtype());
  return std::vector<Gradient>{
      c.needs_grad(0) ? grad_a(c, s, mul(c.grad(), to_a)) : Gradient(),
      c.needs_grad(1) ? grad_b(c, s, mul(c.grad(), sub(ones_like(to_a), to_a))) : Gradient()};
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::kMaximum, "maximum", a, b,
                   [](const BinarySaved& s, const BackwardContext& c) {
                     return select_grad(greater_equal(s.a, s.b), s, c);
                   });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::kMinimum, "minimum", a, b,
                   [](const BinarySaved& s, const BackwardContext& c) {
                     return select_grad(less_equal(s.a, s.b), s, c);
                   });
}

Tensor squared_difference(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::kSquaredDifference, "squared_difference", a, b,
                   [](const BinarySaved& s, const BackwardContext& c) {
                     Tensor g = mul(mul(c.grad(), sub(s.a, s.b)), scalar_like(s.a, 2.0));
                     return std::vector<Gradient>{
                         grad_a(c, s, g), c.needs_grad(1) ? grad_b(c, s, neg(g)) : Gradient()};
                   });
}

Tensor floor_div(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::kFloorDiv, "floor_div", a, b, nullptr);
}
Tensor mod(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kMod, "mod", a, b, nullptr); }

Tensor equal(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::kEqual, "equal", a, b); }
Tensor not_equal(const Tensor& a, const Tensor& b) {
  return binary_raw(BinaryOp::kNotEqual, "not_equal", a, b);
}
Tensor less(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::kLess, "less", a, b); }
Tensor less_equal(const Tensor& a, const Tensor& b) {
  return binary_raw(BinaryOp::kLessEqual, "less_equal", a, b);
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return binary_raw(BinaryOp::kGreater, "greater", a, b);
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return binary_raw(BinaryOp::kGreaterEqual, "greater_equal", a, b);
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary_raw(BinaryOp::kLogicalAnd, "logical_and", a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return binary_raw(BinaryOp::kLogicalOr, "logical_or", a, b);
}
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
  return unary_op(UnaryOp::kReciprocal, "reciprocal", x,
                  [](const Tensor&, const Tensor& y, const Tensor& dy) {
                    return neg(mul(dy, square(y)));
                  });
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
Tensor elu(const Tensor& x, double alpha) { return activation_op(Activation::kElu, alpha, "elu", x); }
Tensor sigmoid(const Tensor& x) { return activation_op(Activation::kSigmoid, 0, "sigmoid", x); }
Tensor tanh(const Tensor& x) { return activation_op(Activation::kTanh, 0, "tanh", x); }
Tensor gelu(const Tensor& x) { return activation_op(Activation::kGelu, 0, "gelu", x); }
Tensor softplus(const Tensor& x) { return activation_op(Activation::kSoftplus, 0, "softplus", x); }

Tensor activate(const Tensor& x, Activation activation, double alpha) {
  switch (activation) {
    case Activation::kNone: return x;
    case Activation::kRelu: return relu(x);
    case Activation::kSigmoid: return sigmoid(x);
    case Activation::kTanh: return tanh(x);
    case Activation::kGelu: return gelu(x);
    case Activation::kElu: return elu(x, alpha);
    case Activation::kLeakyRelu: return leaky_relu(x, alpha);
    case Activation::kSoftplus: return softplus(x);
  }
  return x;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  checks::defined("where", cond, "condition");
  checks::defined("where", a, "first operand");
  checks::defined("where", b, "second operand");
  checks::dtype("where", cond, DType::kBool, "condition");
  checks::same_dtype("where", a, b);
  checks::same_device("where", a, b);
  checks::same_device("where", cond, a);
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(),
                                 "where");
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  if (shape.num_elements() > 0) {
    kernels::where.call(a.device(), views::broadcast(cond, shape, "where"),
                        views::broadcast(a, shape, "where"), views::broadcast(b, shape, "where"),
                        out);
  }
  if (is_floating(a.dtype()) && autodiff::should_record({&a, &b})) {
    autodiff::record("where", {cond, a, b}, {out}, [cond, a, b](const BackwardContext& c) {
      Tensor zero = zeros_like(c.grad());
      return std::vector<Gradient>{
          Gradient(),
          c.needs_grad(1) ? Gradient(reduce_to_shape(where(cond, c.grad(), zero), a.shape()))
                          : Gradient(),
          c.needs_grad(2) ? Gradient(reduce_to_shape(where(cond, zero, c.grad()), b.shape()))
                          : Gradient()};
    });
  }
  return out;
}

Tensor clip_by_value(const Tensor& x, double lo, double hi) {
  checks::defined("clip_by_value", x);
  if (lo > hi) {
    throw InvalidArgumentError(
        str_cat("clip_by_value: lower bound ", lo, " exceeds upper bound ", hi));
  }
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() > 0) kernels::clip.call(x.device(), x, lo, hi, y);
  if (is_floating(x.dtype()) && autodiff::should_record({&x})) {
    autodiff::record("clip_by_value", {x}, {y}, [x, lo, hi](const BackwardContext& c) {
      Tensor inside = logical_and(greater_equal(x, scalar_like(x, lo)),
                                  less_equal(x, scalar_like(x, hi)));
      return std::vector<Gradient>{where(inside, c.grad(), zeros_like(c.grad()))};
    });
  }
  return y;
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(b, a), b); }

}  // namespace cadre
