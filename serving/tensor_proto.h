// Tensors to and from tensorflow.TensorProto, as TensorFlow Serving's gRPC API carries them.
#pragma once

#include <string>

#include "cadre/tensor/tensor.h"
#include "serving/proto/tensorflow.pb.h"

namespace cadre::serving_internal {

// Throws InvalidArgumentError for a dtype Cadre has no tensors of (strings, complex, ...).
DType from_proto_dtype(tensorflow::DataType dtype, const std::string& what);
tensorflow::DataType to_proto_dtype(DType dtype);

// The tensor a TensorProto holds, from tensor_content or else its dtype's typed field.
// Throws InvalidArgumentError naming `what` when the values do not fill the shape.
Tensor from_tensor_proto(const tensorflow::TensorProto& proto, const std::string& what);

// As TensorFlow's Tensor::AsProtoField: values in the dtype's typed field.
void to_tensor_proto(const Tensor& tensor, tensorflow::TensorProto* proto);

}  // namespace cadre::serving_internal
