// The gradient of a tensor: dense, or sparse rows (IndexedSlices) as produced by gather
// (embedding lookups), so that an embedding's gradient costs the rows touched, not the table.
// Inside the tape a third form exists: a dense gradient not yet built (see
// autodiff::DeferredGradient); gradient() never returns one.
#pragma once

#include <memory>
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

namespace autodiff {

// A dense gradient kept in the form its op made it, so that the op which consumes it may
// read that form instead of the whole tensor: max pooling's gradient is its output's
// gradient and the positions of the maxima, which the convolution before the pooling uses
// without the input-sized tensor of zeros and scattered values between them. The tape
// passes it only to an op that recorded that it takes one (autodiff::record), and to a
// receiver of final gradients that builds them in pieces (GradientTape::announce), and
// builds the dense tensor for every other use.
class DeferredGradient {
 public:
  virtual ~DeferredGradient() = default;
  virtual Tensor materialize() const = 0;
  // Rows [begin, end) of the first dimension alone, contiguous; undefined for a form that
  // cannot build part of itself (materialize() then).
  virtual Tensor rows(int64_t /*begin*/, int64_t /*end*/) const { return Tensor(); }
  // materialize() into `out` (contiguous, of this shape, dtype and device), which a form
  // that can build itself there overrides: a receiver that keeps the gradient in a buffer
  // of its own then holds it once, not also as a temporary of the same size.
  virtual void materialize_into(Tensor& out) const { out.assign(materialize()); }
  virtual Shape shape() const = 0;
  virtual DType dtype() const = 0;
  virtual Device device() const = 0;
};

}  // namespace autodiff

class Gradient {
 public:
  Gradient() = default;            // no gradient (the source does not affect the target)
  Gradient(Tensor dense);          // NOLINT: a dense gradient converts implicitly
  Gradient(IndexedSlices sparse);  // NOLINT
  Gradient(std::shared_ptr<const autodiff::DeferredGradient> deferred);  // NOLINT

  bool defined() const { return dense_.defined() || sparse_.has_value() || deferred_ != nullptr; }
  bool is_sparse() const { return sparse_.has_value(); }
  // The deferred form, or null.
  const autodiff::DeferredGradient* deferred() const { return deferred_.get(); }
  Shape shape() const;
  DType dtype() const;
  Device device() const;
  // The dense tensor; throws FailedPreconditionError for a sparse or deferred gradient.
  const Tensor& dense() const;
  // The slices; throws FailedPreconditionError for a dense gradient.
  const IndexedSlices& sparse() const;
  // Dense whatever the form (a sparse gradient is scattered into zeros, a deferred one
  // built).
  Tensor to_dense() const;

 private:
  Tensor dense_;
  std::optional<IndexedSlices> sparse_;
  std::shared_ptr<const autodiff::DeferredGradient> deferred_;
};

// a + b, keeping the sum sparse when both are (rows concatenated); deferred gradients are
// built first.
Gradient add_gradients(const Gradient& a, const Gradient& b);

}  // namespace cadre
