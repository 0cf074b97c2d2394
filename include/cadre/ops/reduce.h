// Reductions over axes. `axes` empty means every axis; negative axes count from the end.
// With keepdims the reduced axes stay with size 1.
#pragma once

#include <vector>

#include "cadre/tensor/tensor.h"

namespace cadre {

Tensor sum(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false);
// The gradient of max and min is shared equally among the elements that attain the
// extreme, as in TensorFlow.
Tensor max(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false);
Tensor any(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false);  // bool
Tensor all(const Tensor& x, const std::vector<int>& axes = {}, bool keepdims = false);  // bool
// int64 index of the first extreme along `axis`.
Tensor argmax(const Tensor& x, int axis);
Tensor argmin(const Tensor& x, int axis);

// Sums x down to `shape`, undoing a broadcast of `shape` to x's shape (the gradient of
// broadcasting).
Tensor reduce_to_shape(const Tensor& x, const Shape& shape);

}  // namespace cadre
