#include "cadre/ops/array.h"

#include <cmath>
#include <numeric>

#include "cadre/autodiff/tape.h"
#include "cadre/base/errors.h"
#include "cadre/ops/reduce.h"
#include "core/base/strings.h"
#include "core/kernels/copies.h"
#include "core/kernels/elementwise.h"
#include "core/ops/checks.h"
#include "core/tensor/views.h"

namespace cadre {

using autodiff::BackwardContext;

namespace {

std::vector<int> inverse_permutation(const std::vector<int>& perm) {
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
  return inverse;
}

}  // namespace

Tensor reshape(const Tensor& x, const std::vector<int64_t>& dims) {
  checks::defined("reshape", x);
  Shape shape = views::infer_shape(dims, x.numel(), "reshape");
  if (shape == x.shape()) return x;
  Tensor y = views::reshape(x, shape);
  if (!y.defined()) y = views::reshape(kernels::clone_raw(x), shape);
  if (autodiff::should_record({&x})) {
    autodiff::record("reshape", {x}, {y}, [in = x.shape()](const BackwardContext& c) {
      return std::vector<Gradient>{reshape(c.grad(), in.to_vector())};
    });
  }
  return y;
}

Tensor transpose(const Tensor& x, const std::vector<int>& permutation) {
  checks::defined("transpose", x);
  Tensor y = views::transpose(x, permutation, "transpose");
  if (autodiff::should_record({&x})) {
    autodiff::record("transpose", {x}, {y},
                     [inv = inverse_permutation(permutation)](const BackwardContext& c) {
                       return std::vector<Gradient>{transpose(c.grad(), inv)};
                     });
  }
  return y;
}

Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step) {
  checks::defined("slice", x);
  Tensor y = views::slice(x, axis, start, end, step, "slice");
  if (autodiff::should_record({&x})) {
    autodiff::record(
        "slice", {x}, {y},
        [shape = x.shape(), device = x.device(), axis, start, end, step](const BackwardContext& c) {
          Tensor dx = Tensor::zeros(shape, c.grad().dtype(), device);
          Tensor window = views::slice(dx, axis, start, end, step, "slice");
          kernels::copy.call(dx.device(), c.grad(), window);
          return std::vector<Gradient>{dx};
        });
  }
  return y;
}

Tensor expand_dims(const Tensor& x, int axis) {
  checks::defined("expand_dims", x);
  int rank = x.rank();
  int a = axis < 0 ? axis + rank + 1 : axis;
  if (a < 0 || a > rank) {
    throw InvalidArgumentError(
        str_cat("expand_dims: axis ", axis, " is out of range for a tensor of shape ", x.shape()));
  }
  std::vector<int64_t> dims = x.shape().to_vector();
  dims.insert(dims.begin() + a, 1);
  return reshape(x, dims);
}

Tensor squeeze(const Tensor& x, int axis) {
  checks::defined("squeeze", x);
  int a = x.shape().normalize_axis(axis);
  if (x.shape()[a] != 1) {
    throw InvalidArgumentError(str_cat("squeeze: axis ", axis, " of shape ", x.shape(),
                                       " has size ", x.shape()[a], ", not 1"));
  }
  return reshape(x, x.shape().without_dim(a).to_vector());
}

Tensor flatten(const Tensor& x) {
  checks::defined("flatten", x);
  if (x.rank() < 1) throw InvalidArgumentError("flatten: expected at least rank 1, got a scalar");
  // The other dimensions' product, not -1: a batch with no rows has nothing to infer from.
  int64_t columns = 1;
  for (int i = 1; i < x.rank(); ++i) columns *= x.shape()[i];
  return reshape(x, {x.shape()[0], columns});
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  checks::defined("broadcast_to", x);
  Tensor y = views::broadcast(x, shape, "broadcast_to");
  if (autodiff::should_record({&x})) {
    autodiff::record("broadcast_to", {x}, {y}, [in = x.shape()](const BackwardContext& c) {
      return std::vector<Gradient>{reduce_to_shape(c.grad(), in)};
    });
  }
  return y;
}

Tensor concat(const std::vector<Tensor>& tensors, int axis) {
  if (tensors.empty()) throw InvalidArgumentError("concat: no tensors given");
  const Tensor& first = tensors[0];
  checks::defined("concat", first);
  int a = first.shape().normalize_axis(axis);
  int64_t total = 0;
  for (const Tensor& t : tensors) {
    checks::defined("concat", t);
    checks::same_dtype("concat", first, t);
    checks::same_device("concat", first, t);
    bool fits = t.rank() == first.rank();
    for (int d = 0; fits && d < t.rank(); ++d) fits = d == a || t.shape()[d] == first.shape()[d];
    if (!fits) {
      throw InvalidArgumentError(str_cat("concat: shapes ", first.shape(), " and ", t.shape(),
                                         " differ outside axis ", axis));
    }
    total += t.shape()[a];
  }
  Tensor out = Tensor::empty(first.shape().with_dim(a, total), first.dtype(), first.device());
  std::vector<int64_t> sizes;
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    int64_t n = t.shape()[a];
    Tensor window = views::slice(out, a, at, at + n, 1, "concat");
    if (n > 0) kernels::copy.call(out.device(), t, window);
    sizes.push_back(n);
    at += n;
  }
  if (autodiff::should_record(std::span<const Tensor>(tensors))) {
    autodiff::record("concat", tensors, {out}, [sizes, a](const BackwardContext& c) {
      std::vector<Gradient> grads;
      int64_t at = 0;
      for (int64_t n : sizes) {
        grads.push_back(views::slice(c.grad(), a, at, at + n, 1, "concat"));
        at += n;
      }
      return grads;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int axis) {
  if (tensors.empty()) throw InvalidArgumentError("stack: no tensors given");
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    checks::defined("stack", t);
    if (t.shape() != tensors[0].shape()) {
      throw InvalidArgumentError(
          str_cat("stack: shapes differ: ", tensors[0].shape(), " and ", t.shape()));
    }
    expanded.push_back(expand_dims(t, axis));
  }
  return concat(expanded, axis);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis) {
  checks::defined("split", x);
  int a = x.shape().normalize_axis(axis);
  int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  if (total != x.shape()[a]) {
    throw InvalidArgumentError(str_cat("split: sizes [", join(sizes), "] add up to ", total,
                                       ", not to the ", x.shape()[a], " of axis ", axis,
                                       " of shape ", x.shape()));
  }
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (int64_t n : sizes) {
    parts.push_back(slice(x, a, at, at + n));
    at += n;
  }
  return parts;
}

Tensor contiguous(const Tensor& x) {
  checks::defined("contiguous", x);
  if (x.is_contiguous()) return x;
  Tensor y = kernels::clone_raw(x);
  if (autodiff::should_record({&x})) {
    autodiff::record("contiguous", {x}, {y},
                     [](const BackwardContext& c) { return std::vector<Gradient>{c.grad()}; });
  }
  return y;
}

Tensor clone(const Tensor& x) {
  checks::defined("clone", x);
  Tensor y = kernels::clone_raw(x);
  if (autodiff::should_record({&x})) {
    autodiff::record("clone", {x}, {y},
                     [](const BackwardContext& c) { return std::vector<Gradient>{c.grad()}; });
  }
  return y;
}

Tensor to_device(const Tensor& x, Device device) {
  checks::defined("to", x);
  if (x.device() == device) return x;
  check_device(device);
  Tensor src;
  {
    NoGradScope no_grad;
    src = contiguous(x);
  }
  Tensor y = Tensor::empty(x.shape(), x.dtype(), device);
  kernels::copy_across_devices(src, y);
  if (autodiff::should_record({&x})) {
    autodiff::record("to", {x}, {y}, [from = x.device()](const BackwardContext& c) {
      return std::vector<Gradient>{to_device(c.grad(), from)};
    });
  }
  return y;
}

Tensor cast(const Tensor& x, DType dtype) {
  checks::defined("cast", x);
  if (x.dtype() == dtype) return x;
  Tensor y = Tensor::empty(x.shape(), dtype, x.device());
  kernels::cast.call(x.device(), x, y);
  if (autodiff::should_record({&x}) && is_floating(x.dtype()) && is_floating(dtype)) {
    autodiff::record("cast", {x}, {y}, [from = x.dtype()](const BackwardContext& c) {
      return std::vector<Gradient>{cast(c.grad(), from)};
    });
  }
  return y;
}

Tensor zeros_like(const Tensor& x) { return Tensor::zeros(x.shape(), x.dtype(), x.device()); }
Tensor ones_like(const Tensor& x) { return Tensor::ones(x.shape(), x.dtype(), x.device()); }
Tensor full_like(const Tensor& x, double value) {
  return Tensor::full(x.shape(), value, x.dtype(), x.device());
}

Tensor range(double start, double limit, double delta, DType dtype) {
  if (delta == 0) throw InvalidArgumentError("range: delta must not be 0");
  double span = (limit - start) / delta;
  int64_t n = span > 0 ? static_cast<int64_t>(std::ceil(span)) : 0;
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = start + static_cast<double>(i) * delta;
  return cast(Tensor::from_vector(values), dtype);
}

}  // namespace cadre
