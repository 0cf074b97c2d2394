// Splitting tensors into rows and joining rows into batches, the data movement behind
// from_tensor_slices, batch, padded_batch and unbatch.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/tensor/tensor.h"

namespace cadre::io {

// Row i of dimension 0 of x (rank >= 1), a view sharing x's buffer.
Tensor row_view(const Tensor& x, int64_t i);

// Stacks tensors of one dtype and shape along a new dimension 0. Throws
// InvalidArgumentError naming `what` (the feature) and the two differing shapes or dtypes.
Tensor stack_rows(const std::vector<const Tensor*>& rows, std::string_view what);

// Rows `rows` of a host tensor, stacked as stack_rows stacks their views. Throws
// DataLossError naming `what` for a row out of range.
Tensor gather_rows(const Tensor& source, std::span<const int64_t> rows, std::string_view what);
// The origin of a batch of one-word origins, as batch writes it: each row preceded by 1.
std::vector<int64_t> batch_origin(std::span<const int64_t> rows);

// Stacks tensors of one dtype and rank, padding each dimension to the largest size among
// them, with `padding_value`.
Tensor pad_and_stack_rows(const std::vector<const Tensor*>& rows, double padding_value,
                          std::string_view what);

}  // namespace cadre::io
