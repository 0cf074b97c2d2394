// Views of a tensor's buffer built from its shape and strides alone. These record nothing
// on a gradient tape: they are the building blocks of the differentiable shape ops and of
// kernels. Each throws InvalidArgumentError naming `op` when its arguments do not fit.
#pragma once

#include <vector>

#include "cadre/base/errors.h"
#include "cadre/tensor/tensor.h"

namespace cadre::views {

// Resolves one -1 in `dims` against `num_elements`.
Shape infer_shape(const std::vector<int64_t>& dims, int64_t num_elements, const char* op);
// A view when the tensor is contiguous; undefined (defined() false) when a copy is needed.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, const std::vector<int>& permutation, const char* op);
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step, const char* op);
Tensor broadcast(const Tensor& x, const Shape& shape, const char* op);
// A 2-D tensor stored as the transpose of a contiguous matrix (strides {1, rows}).
bool is_transposed_matrix(const Tensor& x);
// A 2-D tensor whose rows are contiguous, stride(0) >= cols elements apart (strides
// {ld, 1}: a contiguous matrix, or a slice of its columns).
bool is_row_strided_matrix(const Tensor& x);

}  // namespace cadre::views
