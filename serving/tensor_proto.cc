#include "serving/tensor_proto.h"

#include <cstring>
#include <vector>

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::serving_internal {

namespace {

template <typename T, typename Field>
Tensor from_field(const Field& field, const Shape& shape, DType dtype, const std::string& what) {
  if (static_cast<int64_t>(field.size()) != shape.num_elements()) {
    throw InvalidArgumentError(str_cat(what, ": ", field.size(), " values for shape ", shape, " (",
                                       shape.num_elements(), " elements)"));
  }
  std::vector<T> values(field.begin(), field.end());
  return Tensor::from_vector(values, shape).cast(dtype);
}

}  // namespace

DType from_proto_dtype(tensorflow::DataType dtype, const std::string& what) {
  switch (dtype) {
    case tensorflow::DT_FLOAT:
      return DType::kFloat32;
    case tensorflow::DT_DOUBLE:
      return DType::kFloat64;
    case tensorflow::DT_INT32:
      return DType::kInt32;
    case tensorflow::DT_INT64:
      return DType::kInt64;
    case tensorflow::DT_UINT8:
      return DType::kUInt8;
    case tensorflow::DT_BOOL:
      return DType::kBool;
    case tensorflow::DT_BFLOAT16:
      return DType::kBFloat16;
    case tensorflow::DT_HALF:
      return DType::kFloat16;
    default:
      throw InvalidArgumentError(str_cat(what, ": dtype ", tensorflow::DataType_Name(dtype), " (",
                                         static_cast<int>(dtype), ") is not supported"));
  }
}

tensorflow::DataType to_proto_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return tensorflow::DT_FLOAT;
    case DType::kFloat64:
      return tensorflow::DT_DOUBLE;
    case DType::kInt32:
      return tensorflow::DT_INT32;
    case DType::kInt64:
      return tensorflow::DT_INT64;
    case DType::kUInt8:
      return tensorflow::DT_UINT8;
    case DType::kBool:
      return tensorflow::DT_BOOL;
    case DType::kBFloat16:
      return tensorflow::DT_BFLOAT16;
    case DType::kFloat16:
      return tensorflow::DT_HALF;
  }
  return tensorflow::DT_INVALID;
}

Tensor from_tensor_proto(const tensorflow::TensorProto& proto, const std::string& what) {
  DType dtype = from_proto_dtype(proto.dtype(), what);
  if (proto.tensor_shape().unknown_rank()) {
    throw InvalidArgumentError(str_cat(what, ": the shape must be known"));
  }
  // Bounded so that the element count cannot overflow: a request's values are bounded by
  // the message size anyway.
  constexpr int64_t kMaxElements = int64_t{1} << 34;
  std::vector<int64_t> dims;
  int64_t elements = 1;
  for (const auto& dim : proto.tensor_shape().dim()) {
    if (dim.size() < 0 || dim.size() > kMaxElements ||
        (dim.size() > 0 && elements > kMaxElements / dim.size())) {
      throw InvalidArgumentError(str_cat(what, ": dimension ", dim.size(), " is invalid or makes ",
                                         "the tensor larger than a request can be"));
    }
    elements *= dim.size();
    dims.push_back(dim.size());
  }
  Shape shape(dims);
  if (!proto.tensor_content().empty()) {
    size_t expected = static_cast<size_t>(shape.num_elements()) * dtype_size(dtype);
    if (proto.tensor_content().size() != expected) {
      throw InvalidArgumentError(str_cat(what, ": tensor_content has ",
                                         proto.tensor_content().size(), " bytes; shape ", shape,
                                         " of ", dtype_name(dtype), " takes ", expected));
    }
    return Tensor::from_bytes(proto.tensor_content().data(), shape, dtype);
  }
  switch (dtype) {
    case DType::kFloat32:
      return from_field<float>(proto.float_val(), shape, dtype, what);
    case DType::kFloat64:
      return from_field<double>(proto.double_val(), shape, dtype, what);
    case DType::kInt64:
      return from_field<int64_t>(proto.int64_val(), shape, dtype, what);
    case DType::kBool:
      return from_field<uint8_t>(proto.bool_val(), shape, DType::kUInt8, what).cast(dtype);
    case DType::kBFloat16:
    case DType::kFloat16: {
      Tensor bits = from_field<int32_t>(proto.half_val(), shape, DType::kInt32, what);
      std::vector<uint16_t> narrow;
      for (int32_t value : bits.to_vector<int32_t>())
        narrow.push_back(static_cast<uint16_t>(value));
      return Tensor::from_bytes(narrow.data(), shape, dtype);
    }
    default:
      return from_field<int32_t>(proto.int_val(), shape, dtype, what);
  }
}

void to_tensor_proto(const Tensor& tensor, tensorflow::TensorProto* proto) {
  proto->set_dtype(to_proto_dtype(tensor.dtype()));
  for (int64_t dim : tensor.shape().dims()) proto->mutable_tensor_shape()->add_dim()->set_size(dim);
  switch (tensor.dtype()) {
    case DType::kFloat32:
      for (float value : tensor.to_vector<float>()) proto->add_float_val(value);
      break;
    case DType::kFloat64:
      for (double value : tensor.to_vector<double>()) proto->add_double_val(value);
      break;
    case DType::kInt64:
      for (int64_t value : tensor.to_vector<int64_t>()) proto->add_int64_val(value);
      break;
    case DType::kBool:
      for (int64_t value : tensor.to_vector<int64_t>()) proto->add_bool_val(value != 0);
      break;
    case DType::kBFloat16:
    case DType::kFloat16: {
      Tensor host = tensor.contiguous().to(Device::cpu());
      std::vector<uint16_t> bits(static_cast<size_t>(host.numel()));
      std::memcpy(bits.data(), host.raw_data(), bits.size() * sizeof(uint16_t));
      for (uint16_t value : bits) proto->add_half_val(value);
      break;
    }
    default:
      for (int64_t value : tensor.to_vector<int64_t>())
        proto->add_int_val(static_cast<int32_t>(value));
  }
}

}  // namespace cadre::serving_internal
