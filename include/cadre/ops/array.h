// Array ops: shapes and views, joining and splitting, copies between devices and dtypes,
// and tensors filled with a value. Differentiable where it makes sense; each records on an
// active GradientTape.
#pragma once

#include <vector>

#include "cadre/tensor/tensor.h"

namespace cadre {

// `dims` may hold one -1. A view when x is contiguous, else a copy.
Tensor reshape(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, const std::vector<int>& permutation);  // a view
// Elements [start, end) with `step` along `axis`; negative bounds count from the end and
// bounds are clamped, as in Python slicing. A view.
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step = 1);
Tensor expand_dims(const Tensor& x, int axis);  // axis in [-rank-1, rank]
Tensor squeeze(const Tensor& x, int axis);      // the axis must have size 1
// All but the first dimension folded into one: [N, ...] -> [N, prod(...)].
Tensor flatten(const Tensor& x);
Tensor broadcast_to(const Tensor& x, const Shape& shape);  // a view
// Joins tensors of one dtype and device whose shapes agree except along `axis`.
Tensor concat(const std::vector<Tensor>& tensors, int axis);
// Joins tensors of one shape along a new axis.
Tensor stack(const std::vector<Tensor>& tensors, int axis = 0);
// Splits `axis` into pieces of the given sizes (which must add up to its length); views.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis);

Tensor contiguous(const Tensor& x);  // x itself when already contiguous
Tensor clone(const Tensor& x);
Tensor to_device(const Tensor& x, Device device);  // x itself when already there
// x itself when already of that dtype. Floating point to integer truncates toward zero and
// saturates at the integer type's limits, and NaN becomes 0 (the same on every device).
Tensor cast(const Tensor& x, DType dtype);

Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor full_like(const Tensor& x, double value);
// [start, start + delta, ...) up to `limit` (exclusive), as tf.range.
Tensor range(double start, double limit, double delta = 1, DType dtype = DType::kInt64);

}  // namespace cadre
