#include "cadre/ops/reduce.h"

#include <algorithm>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/math.h"
#include "core/base/strings.h"
#include "core/kernels/reduction.h"
#include "core/ops/checks.h"
#include "core/tensor/views.h"

namespace cadre {

using autodiff::BackwardContext;
using kernels::ReduceOp;

namespace {

struct Plan {
  std::vector<char> reduced;  // per axis of x
  Shape out_shape;            // without keepdims
  Shape keep_shape;           // with keepdims
  int64_t reduced_count = 1;
};

Plan plan_reduction(const Tensor& x, const std::vector<int>& axes, const char* op) {
  Plan plan;
  int rank = x.rank();
  plan.reduced.assign(rank, axes.empty() ? 1 : 0);
  for (int axis : axes) {
    int a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) {
      throw InvalidArgumentError(
          str_cat(op, ": axis ", axis, " is out of range for a tensor of shape ", x.shape()));
    }
    plan.reduced[a] = 1;
  }
  for (int d = 0; d < rank; ++d) {
    if (plan.reduced[d]) {
      plan.reduced_count *= x.shape()[d];
      plan.keep_shape.push_back(1);
    } else {
      plan.out_shape.push_back(x.shape()[d]);
      plan.keep_shape.push_back(x.shape()[d]);
    }
  }
  return plan;
}

// x arranged as a contiguous [outer, reduced, inner] tensor.
Tensor as_three_d(const Tensor& x, const Plan& plan) {
  int rank = x.rank();
  int first = -1, last = -1;
  for (int d = 0; d < rank; ++d) {
    if (plan.reduced[d] && x.shape()[d] != 1) {
      if (first < 0) first = d;
      last = d;
    }
  }
  NoGradScope no_grad;
  if (first < 0) {  // nothing of size > 1 is reduced
    return views::reshape(contiguous(x), Shape{x.numel(), 1, 1});
  }
  bool block = true;  // are the reduced axes (of size > 1) one contiguous block?
  for (int d = first; d <= last; ++d) block = block && (plan.reduced[d] || x.shape()[d] == 1);
  if (block) {
    int64_t outer = 1, mid = 1, inner = 1;
    for (int d = 0; d < first; ++d) outer *= x.shape()[d];
    for (int d = first; d <= last; ++d) mid *= x.shape()[d];
    for (int d = last + 1; d < rank; ++d) inner *= x.shape()[d];
    return views::reshape(contiguous(x), Shape{outer, mid, inner});
  }
  std::vector<int> perm;
  for (int d = 0; d < rank; ++d)
    if (!plan.reduced[d]) perm.push_back(d);
  for (int d = 0; d < rank; ++d)
    if (plan.reduced[d]) perm.push_back(d);
  Tensor moved = contiguous(views::transpose(x, perm, "reduce"));
  int64_t kept = x.numel() / std::max<int64_t>(1, plan.reduced_count);
  if (plan.reduced_count == 0) kept = plan.out_shape.num_elements();
  return views::reshape(moved, Shape{kept, plan.reduced_count, 1});
}

Tensor reduce_raw(ReduceOp op, const char* name, const Tensor& x, const Plan& plan, bool keepdims) {
  DType out_dtype = (op == ReduceOp::kAny || op == ReduceOp::kAll) ? DType::kBool : x.dtype();
  Tensor x3 = as_three_d(x, plan);
  Tensor out = Tensor::empty(Shape{x3.shape()[0], x3.shape()[2]}, out_dtype, x.device());
  if ((op == ReduceOp::kMax || op == ReduceOp::kMin) && plan.reduced_count == 0 &&
      out.numel() > 0) {
    throw InvalidArgumentError(str_cat(name, ": cannot reduce an empty axis of shape ", x.shape()));
  }
  if (out.numel() > 0) kernels::reduce.call(x.device(), op, x3, out);
  return views::reshape(out, keepdims ? plan.keep_shape : plan.out_shape);
}

Tensor extreme(ReduceOp op, const char* name, const Tensor& x, const std::vector<int>& axes,
               bool keepdims) {
  checks::defined(name, x);
  if (x.dtype() == DType::kBool)
    throw InvalidArgumentError(str_cat(name, ": bool input; use any/all"));
  Plan plan = plan_reduction(x, axes, name);
  Tensor y = reduce_raw(op, name, x, plan, keepdims);
  if (is_floating(x.dtype()) && autodiff::should_record({&x})) {
    autodiff::record(name, {x}, {y},
                     [x, y, keep = plan.keep_shape, axes](const BackwardContext& c) {
                       Tensor y_full = broadcast_to(reshape(y, keep.to_vector()), x.shape());
                       Tensor hits = cast(equal(x, y_full), x.dtype());
                       Tensor count = sum(hits, axes, /*keepdims=*/true);
                       Tensor g = reshape(c.grad(), keep.to_vector());
                       return std::vector<Gradient>{mul(hits, div(g, count))};
                     });
  }
  return y;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  checks::defined("sum", x);
  if (x.dtype() == DType::kBool) throw InvalidArgumentError("sum: bool input; cast it first");
  Plan plan = plan_reduction(x, axes, "sum");
  Tensor y = reduce_raw(ReduceOp::kSum, "sum", x, plan, keepdims);
  if (is_floating(x.dtype()) && autodiff::should_record({&x})) {
    autodiff::record(
        "sum", {x}, {y}, [in = x.shape(), keep = plan.keep_shape](const BackwardContext& c) {
          return std::vector<Gradient>{broadcast_to(reshape(c.grad(), keep.to_vector()), in)};
        });
  }
  return y;
}

Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  checks::defined("mean", x);
  if (x.dtype() == DType::kBool) throw InvalidArgumentError("mean: bool input; cast it first");
  Plan plan = plan_reduction(x, axes, "mean");
  Tensor y = reduce_raw(ReduceOp::kMean, "mean", x, plan, keepdims);
  if (is_floating(x.dtype()) && autodiff::should_record({&x})) {
    autodiff::record(
        "mean", {x}, {y},
        [in = x.shape(), keep = plan.keep_shape, n = plan.reduced_count](const BackwardContext& c) {
          Tensor g = div(reshape(c.grad(), keep.to_vector()),
                         scalar_like(c.grad(), static_cast<double>(std::max<int64_t>(n, 1))));
          return std::vector<Gradient>{broadcast_to(g, in)};
        });
  }
  return y;
}

Tensor max(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  return extreme(ReduceOp::kMax, "max", x, axes, keepdims);
}

Tensor min(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  return extreme(ReduceOp::kMin, "min", x, axes, keepdims);
}

Tensor any(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  checks::defined("any", x);
  checks::dtype("any", x, DType::kBool);
  return reduce_raw(ReduceOp::kAny, "any", x, plan_reduction(x, axes, "any"), keepdims);
}

Tensor all(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  checks::defined("all", x);
  checks::dtype("all", x, DType::kBool);
  return reduce_raw(ReduceOp::kAll, "all", x, plan_reduction(x, axes, "all"), keepdims);
}

namespace {

Tensor arg_extreme(kernels::ArgReduceOp op, const char* name, const Tensor& x, int axis) {
  checks::defined(name, x);
  if (x.dtype() == DType::kBool) throw InvalidArgumentError(str_cat(name, ": bool input"));
  int a = x.shape().normalize_axis(axis);
  if (x.shape()[a] == 0) {
    throw InvalidArgumentError(
        str_cat(name, ": axis ", axis, " of shape ", x.shape(), " is empty"));
  }
  Plan plan = plan_reduction(x, {a}, name);
  Tensor x3 = as_three_d(x, plan);
  Tensor out = Tensor::empty(Shape{x3.shape()[0], x3.shape()[2]}, DType::kInt64, x.device());
  if (out.numel() > 0) kernels::arg_reduce.call(x.device(), op, x3, out);
  return views::reshape(out, plan.out_shape);
}

}  // namespace

Tensor argmax(const Tensor& x, int axis) {
  return arg_extreme(kernels::ArgReduceOp::kArgMax, "argmax", x, axis);
}

Tensor argmin(const Tensor& x, int axis) {
  return arg_extreme(kernels::ArgReduceOp::kArgMin, "argmin", x, axis);
}

Tensor reduce_to_shape(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  int extra = x.rank() - shape.rank();
  if (extra < 0) {
    throw InvalidArgumentError(
        str_cat("reduce_to_shape: cannot reduce ", x.shape(), " to the larger ", shape));
  }
  std::vector<int> axes;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < extra || (shape[d - extra] == 1 && x.shape()[d] != 1)) axes.push_back(d);
  }
  Tensor reduced = axes.empty() ? x : sum(x, axes, /*keepdims=*/true);
  return reshape(reduced, shape.to_vector());
}

}  // namespace cadre
