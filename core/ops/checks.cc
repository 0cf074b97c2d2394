#include "core/ops/checks.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::checks {

void defined(const char* op, const Tensor& x, std::string_view what) {
  if (!x.defined()) throw InvalidArgumentError(str_cat(op, ": ", what, " is an undefined tensor"));
}

void same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) {
    throw InvalidArgumentError(str_cat(op, ": dtypes differ: ", a.dtype(), " ", a.shape(), " and ",
                                       b.dtype(), " ", b.shape(), " (cast one of them first)"));
  }
}

void same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() != b.device()) {
    throw InvalidArgumentError(
        str_cat(op, ": operands live on different devices: ", a.device(), " and ", b.device()));
  }
}

void same_shape(const char* op, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) {
    throw InvalidArgumentError(str_cat(op, ": shapes differ: ", a.shape(), " and ", b.shape()));
  }
}

void floating(const char* op, const Tensor& x, std::string_view what) {
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64) {
    throw InvalidArgumentError(
        str_cat(op, ": ", what, " has dtype ", x.dtype(), "; expected float32 or float64"));
  }
}

void integer_index(const char* op, const Tensor& x, std::string_view what) {
  if (x.dtype() != DType::kInt32 && x.dtype() != DType::kInt64) {
    throw InvalidArgumentError(
        str_cat(op, ": ", what, " has dtype ", x.dtype(), "; expected int32 or int64"));
  }
}

void rank(const char* op, const Tensor& x, int expected, std::string_view what) {
  if (x.rank() != expected) {
    throw InvalidArgumentError(
        str_cat(op, ": ", what, " has shape ", x.shape(), "; expected rank ", expected));
  }
}

void dtype(const char* op, const Tensor& x, DType expected, std::string_view what) {
  if (x.dtype() != expected) {
    throw InvalidArgumentError(
        str_cat(op, ": ", what, " has dtype ", x.dtype(), "; expected ", expected));
  }
}

}  // namespace cadre::checks
