#include "cadre/autodiff/gradient.h"

#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/kernels/copies.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/indexing.h"
#include "core/tensor/views.h"

namespace cadre {
namespace {

// Gradients are summed and densified with the kernels themselves, below the ops (which
// record on the tape, and whose backward functions the tape runs): nothing here is recorded,
// as nothing in a backward pass is.

// The indices of `slices` as one contiguous row, checked against its values and against the
// rows of its dense shape.
Tensor checked_indices(const IndexedSlices& slices, const char* what) {
  const Tensor& indices = slices.indices;
  const Tensor& values = slices.values;
  if (!indices.defined() || !values.defined()) {
    throw InvalidArgumentError(str_cat(what, ": IndexedSlices with undefined indices or values"));
  }
  if (indices.dtype() != DType::kInt32 && indices.dtype() != DType::kInt64) {
    throw InvalidArgumentError(str_cat(what, ": IndexedSlices indices have dtype ", indices.dtype(),
                                       "; expected int32 or int64"));
  }
  if (indices.device() != values.device() || slices.dense_shape.rank() < 1) {
    throw InvalidArgumentError(str_cat(what, ": IndexedSlices indices on ", indices.device(),
                                       " and values on ", values.device(), " for dense shape ",
                                       slices.dense_shape, " (one device, rank >= 1)"));
  }
  Tensor flat = views::reshape(kernels::contiguous_raw(indices), Shape{indices.numel()});
  std::vector<int64_t> expected{flat.numel()};
  expected.insert(expected.end(), slices.dense_shape.begin() + 1, slices.dense_shape.end());
  if (values.shape() != Shape(expected)) {
    throw InvalidArgumentError(str_cat(what, ": IndexedSlices values of shape ", values.shape(),
                                       " do not fit ", flat.numel(), " indices into a dense shape ",
                                       slices.dense_shape, " (expected ", Shape(expected), ")"));
  }
  const int64_t rows = slices.dense_shape[0];
  int64_t bad = flat.numel() > 0 ? kernels::find_bad_index.call(flat.device(), flat, rows) : -1;
  if (bad >= 0) {
    int64_t value = views::slice(flat, 0, bad, bad + 1, 1, what).item<int64_t>();
    throw InvalidArgumentError(str_cat(what, ": IndexedSlices indices[", bad, "] = ", value,
                                       " is not in [0, ", rows, ")"));
  }
  return flat;
}

// target (contiguous, of slices.dense_shape, slices' dtype and device) += slices.
void scatter_rows(Tensor& target, const IndexedSlices& slices, const char* what) {
  Tensor idx = checked_indices(slices, what);
  if (target.shape() != slices.dense_shape || target.dtype() != slices.values.dtype() ||
      target.device() != slices.values.device()) {
    throw InvalidArgumentError(str_cat(what, ": IndexedSlices of ", slices.values.dtype(), " ",
                                       slices.dense_shape, " on ", slices.values.device(),
                                       " added to ", target.dtype(), " ", target.shape(), " on ",
                                       target.device()));
  }
  const int64_t rows = target.shape()[0];
  const int64_t inner = rows == 0 ? 0 : target.numel() / rows;
  if (idx.numel() == 0 || inner == 0) return;
  Tensor t3 = views::reshape(target, Shape{1, rows, inner});
  Tensor u3 = views::reshape(kernels::contiguous_raw(slices.values), Shape{1, idx.numel(), inner});
  kernels::scatter_add.call(target.device(), idx, u3, t3);
}

// [a; b] along the first axis.
Tensor concat_rows(const Tensor& a, const Tensor& b, const char* what) {
  if (a.dtype() != b.dtype() || a.device() != b.device() || a.rank() < 1 || a.rank() != b.rank() ||
      a.shape().without_dim(0) != b.shape().without_dim(0)) {
    throw InvalidArgumentError(str_cat(what, ": rows of ", a.dtype(), " ", a.shape(), " on ",
                                       a.device(), " and of ", b.dtype(), " ", b.shape(), " on ",
                                       b.device(), " do not join"));
  }
  const int64_t n = a.shape()[0], m = b.shape()[0];
  Tensor out = Tensor::empty(a.shape().with_dim(0, n + m), a.dtype(), a.device());
  if (n > 0) {
    Tensor window = views::slice(out, 0, 0, n, 1, what);
    kernels::copy.call(out.device(), a, window);
  }
  if (m > 0) {
    Tensor window = views::slice(out, 0, n, n + m, 1, what);
    kernels::copy.call(out.device(), b, window);
  }
  return out;
}

Tensor sum(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype() || a.device() != b.device()) {
    throw InvalidArgumentError(str_cat("add_gradients: gradients of ", a.dtype(), " ", a.shape(),
                                       " on ", a.device(), " and of ", b.dtype(), " ", b.shape(),
                                       " on ", b.device(), " do not add up"));
  }
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (out.numel() > 0) kernels::binary.call(a.device(), kernels::BinaryOp::kAdd, a, b, out);
  return out;
}

}  // namespace

Gradient::Gradient(Tensor dense) : dense_(std::move(dense)) {}
Gradient::Gradient(IndexedSlices sparse) : sparse_(std::move(sparse)) {}
Gradient::Gradient(std::shared_ptr<const autodiff::DeferredGradient> deferred)
    : deferred_(std::move(deferred)) {}

Shape Gradient::shape() const {
  if (deferred_) return deferred_->shape();
  return is_sparse() ? sparse_->dense_shape : dense().shape();
}
DType Gradient::dtype() const {
  if (deferred_) return deferred_->dtype();
  return is_sparse() ? sparse_->values.dtype() : dense().dtype();
}
Device Gradient::device() const {
  if (deferred_) return deferred_->device();
  return is_sparse() ? sparse_->values.device() : dense().device();
}

const Tensor& Gradient::dense() const {
  if (is_sparse() || deferred_) {
    throw FailedPreconditionError(str_cat("Gradient::dense: the gradient is ",
                                          is_sparse() ? "sparse" : "deferred", "; use to_dense()"));
  }
  if (!dense_.defined()) throw FailedPreconditionError("Gradient::dense: no gradient");
  return dense_;
}

const IndexedSlices& Gradient::sparse() const {
  if (!is_sparse()) throw FailedPreconditionError("Gradient::sparse: the gradient is dense");
  return *sparse_;
}

Tensor Gradient::to_dense() const {
  if (deferred_) return deferred_->materialize();
  if (!is_sparse()) return dense();
  Tensor out =
      Tensor::zeros(sparse_->dense_shape, sparse_->values.dtype(), sparse_->values.device());
  scatter_rows(out, *sparse_, "to_dense");
  return out;
}

Gradient add_gradients(const Gradient& a, const Gradient& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  if (a.deferred() != nullptr || b.deferred() != nullptr) {
    return add_gradients(a.deferred() != nullptr ? Gradient(a.to_dense()) : a,
                         b.deferred() != nullptr ? Gradient(b.to_dense()) : b);
  }
  if (a.is_sparse() && b.is_sparse()) {
    const IndexedSlices& x = a.sparse();
    const IndexedSlices& y = b.sparse();
    Tensor ix = x.indices, iy = y.indices;
    if (ix.dtype() != iy.dtype()) {
      ix = kernels::cast_raw(ix, DType::kInt64);
      iy = kernels::cast_raw(iy, DType::kInt64);
    }
    return IndexedSlices{concat_rows(ix, iy, "add_gradients"),
                         concat_rows(x.values, y.values, "add_gradients"), x.dense_shape};
  }
  if (a.is_sparse() != b.is_sparse()) {
    const Gradient& sparse = a.is_sparse() ? a : b;
    const Gradient& dense = a.is_sparse() ? b : a;
    Tensor out = kernels::clone_raw(dense.dense());
    scatter_rows(out, sparse.sparse(), "add_gradients");
    return out;
  }
  return sum(a.dense(), b.dense());
}

}  // namespace cadre
