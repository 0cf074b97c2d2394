// Gathering and scattering along an axis, and one-hot encoding.
#pragma once

#include "cadre/tensor/tensor.h"

namespace cadre {

// params[..., indices[...], ...]: out = params.shape[:axis] + indices.shape +
// params.shape[axis+1:]. indices int32/int64; an index outside [0, params.shape[axis]) is
// an InvalidArgumentError naming it. With axis 0 (an embedding lookup) the gradient of
// params is sparse: the rows looked up, not the table.
Tensor gather(const Tensor& params, const Tensor& indices, int axis = 0);
// A copy of `target` with updates added to the rows `indices` (int32/int64 [n]) of axis 0:
// updates has shape [n] + target.shape[1:]. Repeated indices accumulate.
Tensor scatter_add(const Tensor& target, const Tensor& indices, const Tensor& updates);
// indices.shape + [depth], on_value where the last index matches, off_value elsewhere.
Tensor one_hot(const Tensor& indices, int64_t depth, double on_value = 1, double off_value = 0,
               DType dtype = DType::kFloat32);

// Adds an IndexedSlices-style update into `target` in place (not recorded): the primitive
// that sparse optimizer updates and gradient densification use.
void scatter_add_inplace(Tensor& target, const Tensor& indices, const Tensor& updates);

}  // namespace cadre
