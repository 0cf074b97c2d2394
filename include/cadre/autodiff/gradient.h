// The gradient of a tensor: dense, or sparse rows (IndexedSlices) as produced by gather
// (embedding lookups), so that an embedding's gradient costs the rows touched, not the table.
#pragma once

#include <optional>

#include "cadre/tensor/tensor.h"

namespace cadre {

// Rows `indices` (int32 or int64, [n]) of a tensor of `dense_shape` with values `values`
// ([n] + dense_shape[1:]). Repeated indices add up.
struct IndexedSlices {
  Tensor indices;
  Tensor values;
  Shape dense_shape;
};

class Gradient {
 public:
  Gradient() = default;  // no gradient (the source does not affect the target)
  Gradient(Tensor dense);  // NOLINT: a dense gradient converts implicitly
  Gradient(IndexedSlices sparse);  // NOLINT

  bool defined() const { return dense_.defined() || sparse_.has_value(); }
  bool is_sparse() const { return sparse_.has_value(); }
  Shape shape() const;
  DType dtype() const;
  Device device() const;
  // The dense tensor; throws FailedPreconditionError for a sparse gradient.
  const Tensor& dense() const;
  // The slices; throws FailedPreconditionError for a dense gradient.
  const IndexedSlices& sparse() const;
  // Dense either way (a sparse gradient is scattered into zeros).
  Tensor to_dense() const;

 private:
  Tensor dense_;
  std::optional<IndexedSlices> sparse_;
};

// a + b, keeping the sum sparse when both are (rows concatenated).
Gradient add_gradients(const Gradient& a, const Gradient& b);

}  // namespace cadre
