#include "cadre/autodiff/gradient.h"

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/ops/indexing.h"
#include "cadre/ops/math.h"
#include "core/base/strings.h"

namespace cadre {

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
  Tensor out = Tensor::zeros(sparse_->dense_shape, sparse_->values.dtype(), sparse_->values.device());
  scatter_add_inplace(out, sparse_->indices, sparse_->values);
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
      ix = cast(ix, DType::kInt64);
      iy = cast(iy, DType::kInt64);
    }
    return IndexedSlices{concat({ix, iy}, 0), concat({x.values, y.values}, 0), x.dense_shape};
  }
  if (a.is_sparse() != b.is_sparse()) {
    const Gradient& sparse = a.is_sparse() ? a : b;
    const Gradient& dense = a.is_sparse() ? b : a;
    Tensor out = clone(dense.dense());
    scatter_add_inplace(out, sparse.sparse().indices, sparse.sparse().values);
    return out;
  }
  return add(a.dense(), b.dense());
}

}  // namespace cadre
