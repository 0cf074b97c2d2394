// Tensor's methods that fill, write or read values: they run kernels, so they are defined
// in the kernels layer (the rest of Tensor: core/tensor/tensor.cc). None is recorded on a
// gradient tape.

#include <iomanip>
#include <sstream>

#include "cadre/base/errors.h"
#include "cadre/tensor/tensor.h"
#include "core/base/strings.h"
#include "core/kernels/copies.h"
#include "core/kernels/elementwise.h"

namespace cadre {

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  return full(shape, 0.0, dtype, default_device());
}
Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}
Tensor Tensor::ones(const Shape& shape, DType dtype) {
  return full(shape, 1.0, dtype, default_device());
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}
Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  return full(shape, value, dtype, default_device());
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor out = empty(shape, dtype, device);
  kernels::fill.call(device, out, value);
  return out;
}

Tensor Tensor::to_host_contiguous() const {
  Tensor t = *this;
  if (t.dtype() == DType::kBFloat16 || t.dtype() == DType::kFloat16)
    t = kernels::cast_raw(t, DType::kFloat32);
  if (!t.device().is_cpu()) t = kernels::to_device_raw(t, Device::cpu(0));
  return kernels::contiguous_raw(t);
}

void Tensor::assign(const Tensor& source) {
  if (source.shape() != shape()) {
    throw InvalidArgumentError(
        str_cat("assign: source shape ", source.shape(), " differs from the target's ", shape()));
  }
  Tensor src = kernels::to_device_raw(kernels::cast_raw(source, dtype()), device());
  if (src.shares_buffer_with(*this)) {
    if (src.offset() == offset() && src.strides() == strides()) return;
    src = kernels::clone_raw(src);  // another view of this memory: the copy must not overlap itself
  }
  kernels::copy.call(device(), src, *this);
}

std::string Tensor::to_string(int64_t max_elements) const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream out;
  out << "Tensor(shape=" << shape() << ", dtype=" << dtype() << ", device=" << device();
  int64_t n = numel();
  if (n <= max_elements) {
    std::vector<double> values = to_vector<double>();
    out << ", values=";
    // Nested brackets row by row.
    Shape s = shape();
    std::vector<int64_t> counters(s.rank(), 0);
    out << std::setprecision(6);
    for (int d = 0; d < s.rank(); ++d) out << '[';
    for (int64_t i = 0; i < n; ++i) {
      out << values[i];
      int closed = 0;
      for (int d = s.rank() - 1; d >= 0; --d) {
        if (++counters[d] < s[d]) break;
        counters[d] = 0;
        ++closed;
      }
      for (int c = 0; c < closed; ++c) out << ']';
      if (i + 1 < n) out << (closed > 0 ? ", " : " ");
      if (closed > 0 && i + 1 < n) {
        for (int c = 0; c < closed; ++c) out << '[';
      }
    }
    if (s.rank() > 0 && n == 0) {
      for (int d = 0; d < s.rank(); ++d) out << ']';
    }
  }
  out << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& tensor) {
  return out << tensor.to_string();
}

}  // namespace cadre
