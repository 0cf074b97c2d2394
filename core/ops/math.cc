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
    case BinaryOp::kEqual:
    case BinaryOp::kNotEqual:
    case BinaryOp::kLess:
    case BinaryOp::kLessEqual:
    case BinaryOp::kGreater:
    case BinaryOp::kGreaterEqual:
    case BinaryOp::kLogicalAnd:
    case BinaryOp::kLogicalOr:
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

// What a binary op's backward function may read.
struct BinarySaved {
  Tensor a, b, out;  // undefined unless the op asked to keep them
  Shape a_shape, b_shape;
};
enum class Keep { kShapes, kInputs, kInputsAndOutput };
using BinaryGrad = std::vector<Gradient> (*)(const BinarySaved& s, const BackwardContext& c);

Tensor binary_op(BinaryOp op, const char* name, const Tensor& a, const Tensor& b, BinaryGrad grad,
                 Keep keep = Keep::kInputs) {
  Tensor out = binary_raw(op, name, a, b);
  if (grad != nullptr && is_floating(a.dtype()) && autodiff::should_record({&a, &b})) {
    BinarySaved saved{Tensor(), Tensor(), Tensor(), a.shape(), b.shape()};
    if (keep != Keep::kShapes) {
      saved.a = a;
      saved.b = b;
    }
    if (keep == Keep::kInputsAndOutput) saved.out = out;
    autodiff::record(
        name, {a, b}, {out},
        [saved = std::move(saved), grad](const BackwardContext& c) { return grad(saved, c); });
  }
  return out;
}

Gradient grad_a(const BackwardContext& c, const BinarySaved& s, const Tensor& g) {
  return c.needs_grad(0) ? Gradient(reduce_to_shape(g, s.a_shape)) : Gradient();
}
Gradient grad_b(const BackwardContext& c, const BinarySaved& s, const Tensor& g) {
  return c.needs_grad(1) ? Gradient(reduce_to_shape(g, s.b_shape)) : Gradient();
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
  return binary_op(BinaryOp::kMul, "mul", a, b, [](const BinarySaved& s, const BackwardContext& c) {
    return std::vector<Gradient>{c.needs_grad(0) ? grad_a(c, s, mul(c.grad(), s.b)) : Gradient(),
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
Tensor mod(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::kMod, "mod", a, b, nullptr);
}

Tensor equal(const Tensor& a, const Tensor& b) {
  return binary_raw(BinaryOp::kEqual, "equal", a, b);
}
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

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  checks::defined("where", cond, "condition");
  checks::defined("where", a, "first operand");
  checks::defined("where", b, "second operand");
  checks::dtype("where", cond, DType::kBool, "condition");
  checks::same_dtype("where", a, b);
  checks::same_device("where", a, b);
  checks::same_device("where", cond, a);
  Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
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
      Tensor inside =
          logical_and(greater_equal(x, scalar_like(x, lo)), less_equal(x, scalar_like(x, hi)));
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
