// Tensor's differentiable methods: each is the op of the same name (cadre/ops/array.h) and
// records on an active GradientTape as the op does (the rest of Tensor: core/tensor/tensor.cc
// and core/kernels/tensor_methods.cc).

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "cadre/tensor/tensor.h"
#include "core/base/strings.h"

namespace cadre {

Tensor Tensor::reshape(const std::vector<int64_t>& dims) const {
  return cadre::reshape(*this, dims);
}
Tensor Tensor::transpose(const std::vector<int>& perm) const {
  return cadre::transpose(*this, perm);
}
Tensor Tensor::t() const {
  if (rank() != 2) {
    throw InvalidArgumentError(str_cat("t: expected a 2-D tensor, got shape ", shape()));
  }
  return cadre::transpose(*this, {1, 0});
}
Tensor Tensor::slice(int axis, int64_t start, int64_t end, int64_t step) const {
  return cadre::slice(*this, axis, start, end, step);
}
Tensor Tensor::expand_dims(int axis) const { return cadre::expand_dims(*this, axis); }
Tensor Tensor::squeeze(int axis) const { return cadre::squeeze(*this, axis); }
Tensor Tensor::broadcast_to(const Shape& shape) const { return cadre::broadcast_to(*this, shape); }
Tensor Tensor::contiguous() const { return cadre::contiguous(*this); }
Tensor Tensor::clone() const { return cadre::clone(*this); }
Tensor Tensor::to(Device device) const { return cadre::to_device(*this, device); }
Tensor Tensor::cast(DType dtype) const { return cadre::cast(*this, dtype); }

}  // namespace cadre
