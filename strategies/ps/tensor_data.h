// Tensors in the parameter-server protocol (ps.proto's TensorData): dtype, shape and the
// row-major bytes.
#pragma once

#include <string_view>

#include "cadre/base/errors.h"
#include "cadre/tensor/tensor.h"
#include "strategies/ps/ps.pb.h"

namespace cadre::ps {

// A dtype code and dimensions as the protocol carries them, checked: InvalidArgumentError
// naming `what` for an unknown dtype or a negative dimension.
DType checked_dtype(int32_t code, std::string_view what);
Shape checked_shape(const google::protobuf::RepeatedField<int64_t>& dims, std::string_view what);

// Writes `tensor` (any device, any strides) into `out`.
void to_proto(const Tensor& tensor, TensorData* out);
// The tensor `data` holds, on the host. Throws InvalidArgumentError naming `what` when the
// dtype is unknown or the bytes do not match the shape.
Tensor from_proto(const TensorData& data, std::string_view what);

}  // namespace cadre::ps
