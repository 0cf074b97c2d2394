#include "strategies/ps/tensor_data.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::ps {

void to_proto(const Tensor& tensor, TensorData* out) {
  Tensor host = tensor.to(Device::cpu(0)).contiguous();
  out->set_dtype(static_cast<int32_t>(host.dtype()));
  out->clear_shape();
  for (int64_t d : host.shape()) out->add_shape(d);
  out->set_data(host.raw_data(), host.nbytes());
}

DType checked_dtype(int32_t code, std::string_view what) {
  if (code < 0 || code > static_cast<int32_t>(DType::kFloat16)) {
    throw InvalidArgumentError(str_cat(what, ": unknown dtype code ", code));
  }
  return static_cast<DType>(code);
}

Shape checked_shape(const google::protobuf::RepeatedField<int64_t>& dims, std::string_view what) {
  std::vector<int64_t> v(dims.begin(), dims.end());
  if (v.size() > static_cast<size_t>(Shape::kMaxRank)) {
    throw InvalidArgumentError(str_cat(what, ": rank ", v.size(), " is over ", Shape::kMaxRank));
  }
  // Counted before anything waits on or allocates for it: its byte count must fit an int64.
  int64_t bytes = 16;
  for (int64_t d : v) {
    if (d < 0) throw InvalidArgumentError(str_cat(what, ": negative dimension in [", join(v), "]"));
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      throw InvalidArgumentError(
          str_cat(what, ": shape [", join(v), "] has more elements than a tensor can hold"));
    }
  }
  return Shape(v);
}

Tensor from_proto(const TensorData& data, std::string_view what) {
  DType dtype = checked_dtype(data.dtype(), what);
  Shape shape = checked_shape(data.shape(), what);
  size_t expected = static_cast<size_t>(shape.num_elements()) * dtype_size(dtype);
  if (data.data().size() != expected) {
    throw InvalidArgumentError(str_cat(what, ": ", data.data().size(), " bytes for ",
                                       dtype_name(dtype), " ", shape, " (expected ", expected,
                                       ")"));
  }
  return Tensor::from_bytes(data.data().data(), shape, dtype);
}

}  // namespace cadre::ps
