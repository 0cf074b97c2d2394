#include "cadre/ops/indexing.h"

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"
#include "core/kernels/indexing.h"
#include "core/ops/checks.h"
#include "core/tensor/views.h"

namespace cadre {

using autodiff::BackwardContext;

namespace {

struct Split3 {
  int64_t outer = 1, rows = 1, inner = 1;
};

Split3 split_at(const Shape& shape, int axis) {
  Split3 s;
  for (int d = 0; d < axis; ++d) s.outer *= shape[d];
  s.rows = shape[axis];
  for (int d = axis + 1; d < shape.rank(); ++d) s.inner *= shape[d];
  return s;
}

void check_indices(const char* op, const Tensor& indices, int64_t limit, const Shape& shape,
                   int axis) {
  int64_t bad = kernels::find_bad_index.call(indices.device(), indices, limit);
  if (bad >= 0) {
    Tensor one = views::reshape(contiguous(indices), Shape{indices.numel()});
    int64_t value = slice(one, 0, bad, bad + 1).item<int64_t>();
    throw InvalidArgumentError(str_cat(op, ": indices[", bad, "] = ", value, " is not in [0, ",
                                       limit, ") for axis ", axis, " of shape ", shape));
  }
}

Tensor flat_indices(const Tensor& indices) {
  NoGradScope no_grad;
  return views::reshape(contiguous(indices), Shape{indices.numel()});
}

}  // namespace

Tensor gather(const Tensor& params, const Tensor& indices, int axis) {
  checks::defined("gather", params, "params");
  checks::defined("gather", indices, "indices");
  checks::integer_index("gather", indices);
  checks::same_device("gather", params, indices);
  int a = params.shape().normalize_axis(axis);
  Split3 s = split_at(params.shape(), a);
  Tensor idx = flat_indices(indices);
  check_indices("gather", idx, s.rows, params.shape(), a);

  Tensor p3;
  {
    NoGradScope no_grad;
    p3 = views::reshape(contiguous(params), Shape{s.outer, s.rows, s.inner});
  }
  Tensor out3 =
      Tensor::empty(Shape{s.outer, idx.numel(), s.inner}, params.dtype(), params.device());
  if (out3.numel() > 0) kernels::gather.call(params.device(), p3, idx, out3);
  std::vector<int64_t> dims(params.shape().begin(), params.shape().begin() + a);
  dims.insert(dims.end(), indices.shape().begin(), indices.shape().end());
  dims.insert(dims.end(), params.shape().begin() + a + 1, params.shape().end());
  Tensor out = views::reshape(out3, Shape(dims));

  if (is_floating(params.dtype()) && autodiff::should_record({&params})) {
    autodiff::record(
        "gather", {params, indices}, {out},
        [idx, a, s, shape = params.shape()](const BackwardContext& c) {
          if (a == 0) {
            std::vector<int64_t> value_dims{idx.numel()};
            value_dims.insert(value_dims.end(), shape.begin() + 1, shape.end());
            return std::vector<Gradient>{IndexedSlices{idx, reshape(c.grad(), value_dims), shape},
                                         Gradient()};
          }
          Tensor dp =
              Tensor::zeros(Shape{s.outer, s.rows, s.inner}, c.grad().dtype(), c.grad().device());
          Tensor g3 = views::reshape(contiguous(c.grad()), Shape{s.outer, idx.numel(), s.inner});
          kernels::scatter_add.call(dp.device(), idx, g3, dp);
          return std::vector<Gradient>{views::reshape(dp, shape), Gradient()};
        });
  }
  return out;
}

void scatter_add_inplace(Tensor& target, const Tensor& indices, const Tensor& updates) {
  checks::defined("scatter_add", target, "target");
  checks::integer_index("scatter_add", indices);
  checks::same_dtype("scatter_add", target, updates);
  checks::same_device("scatter_add", target, updates);
  checks::same_device("scatter_add", target, indices);
  if (target.rank() < 1) throw InvalidArgumentError("scatter_add: target must have rank >= 1");
  if (!target.is_contiguous()) {
    throw InvalidArgumentError("scatter_add: the target must be contiguous to update in place");
  }
  Tensor idx = flat_indices(indices);
  std::vector<int64_t> expected{idx.numel()};
  expected.insert(expected.end(), target.shape().begin() + 1, target.shape().end());
  if (updates.shape() != Shape(expected)) {
    throw InvalidArgumentError(str_cat(
        "scatter_add: updates of shape ", updates.shape(), " do not fit ", idx.numel(),
        " indices into a target of shape ", target.shape(), " (expected ", Shape(expected), ")"));
  }
  check_indices("scatter_add", idx, target.shape()[0], target.shape(), 0);
  int64_t inner = target.numel() / std::max<int64_t>(1, target.shape()[0]);
  if (target.shape()[0] == 0) inner = 0;
  Tensor t3 = views::reshape(target, Shape{1, target.shape()[0], inner});
  Tensor u3;
  {
    NoGradScope no_grad;
    u3 = views::reshape(contiguous(updates), Shape{1, idx.numel(), inner});
  }
  if (idx.numel() > 0 && inner > 0) kernels::scatter_add.call(target.device(), idx, u3, t3);
}

Tensor scatter_add(const Tensor& target, const Tensor& indices, const Tensor& updates) {
  Tensor out;
  {
    NoGradScope no_grad;
    out = clone(target);
  }
  scatter_add_inplace(out, indices, updates);
  if (is_floating(target.dtype()) && autodiff::should_record({&target, &updates})) {
    Tensor idx = flat_indices(indices);
    autodiff::record("scatter_add", {target, indices, updates}, {out},
                     [idx, ushape = updates.shape()](const BackwardContext& c) {
                       Gradient du;
                       if (c.needs_grad(2))
                         du = reshape(gather(c.grad(), idx, 0), ushape.to_vector());
                       return std::vector<Gradient>{c.grad(), Gradient(), du};
                     });
  }
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value,
               DType dtype) {
  checks::defined("one_hot", indices, "indices");
  checks::integer_index("one_hot", indices);
  if (depth < 0) throw InvalidArgumentError(str_cat("one_hot: negative depth ", depth));
  Shape shape = indices.shape();
  shape.push_back(depth);
  Tensor out = Tensor::empty(shape, dtype, indices.device());
  if (out.numel() > 0) {
    kernels::one_hot.call(indices.device(), contiguous(indices), on_value, off_value, out);
  }
  return out;
}

}  // namespace cadre
