#include "cadre/tensor/tensor.h"

#include <atomic>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "cadre/base/errors.h"
#include "cadre/ops/array.h"
#include "core/base/strings.h"
#include "core/kernels/elementwise.h"
#include "core/runtime/memory.h"
#include "core/tensor/device_backend.h"

namespace cadre {
namespace {

std::atomic<uint64_t> next_tensor_id{1};

void check_creation_device(const Device& device) {
  if (device.is_gpu() || device.index >= num_cpu_devices() || device.index < 0) {
    check_device(device);
  }
}

}  // namespace

const Tensor::Impl& Tensor::impl() const {
  if (impl_ == nullptr) {
    throw FailedPreconditionError("use of an undefined tensor (one that was never assigned)");
  }
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  return empty(shape, dtype, default_device());
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return empty_deferred(shape, dtype, device, nullptr);
}

Tensor Tensor::empty_deferred(const Shape& shape, DType dtype, Device device,
                              std::shared_ptr<const BufferFill> fill) {
  check_creation_device(device);
  // Refused before any allocation: a size that overflows, or on the host more than the
  // process may use (a device's allocator reports its own out-of-memory).
  double bytes = static_cast<double>(dtype_size(dtype));
  for (int64_t dim : shape.dims()) bytes *= static_cast<double>(dim);
  double limit = device.is_cpu() ? static_cast<double>(memory_limit_bytes()) : 0x1p62;
  if (bytes > limit) {
    throw ResourceExhaustedError(str_cat("a ", dtype_name(dtype), " tensor of shape ", shape,
                                         " needs ", human_bytes(bytes), "; ", device.to_string(),
                                         " may use ", human_bytes(limit), " at most"));
  }
  std::shared_ptr<Buffer> buffer;
  try {
    const size_t size = static_cast<size_t>(shape.num_elements()) * dtype_size(dtype);
    buffer = fill ? std::make_shared<Buffer>(device, size, std::move(fill))
                  : std::make_shared<Buffer>(device, size);
  } catch (const ResourceExhaustedError& e) {
    // The allocator knows the bytes; the caller's tensor is what a person can act on.
    throw ResourceExhaustedError(
        str_cat(e.what(), " for a ", dtype_name(dtype), " tensor of shape ", shape));
  }
  return view_of(std::move(buffer), shape, shape.contiguous_strides(), 0, dtype);
}

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

Tensor Tensor::from_bytes(const void* data, const Shape& shape, DType dtype) {
  Tensor out = empty(shape, dtype, Device::cpu(0));
  if (out.nbytes() > 0) std::memcpy(out.raw_data(), data, out.nbytes());
  Device target = default_device();
  return target == out.device() ? out : out.to(target);
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device,
                         std::function<void()> release) {
  check_creation_device(device);
  size_t bytes = static_cast<size_t>(shape.num_elements()) * dtype_size(dtype);
  auto buffer = std::make_shared<Buffer>(device, data, bytes, std::move(release));
  return view_of(std::move(buffer), shape, shape.contiguous_strides(), 0, dtype);
}

Tensor Tensor::view_of(std::shared_ptr<Buffer> buffer, const Shape& shape, const Strides& strides,
                       int64_t offset, DType dtype) {
  auto impl = std::make_shared<Impl>();
  impl->buffer = std::move(buffer);
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = dtype;
  impl->id = next_tensor_id.fetch_add(1, std::memory_order_relaxed);
  return Tensor(std::move(impl));
}

bool Tensor::is_contiguous() const {
  const Impl& i = impl();
  int64_t expected = 1;
  for (int d = i.shape.rank() - 1; d >= 0; --d) {
    if (i.shape[d] != 1 && i.strides[d] != expected) return false;
    expected *= i.shape[d];
  }
  return true;
}

bool Tensor::shares_buffer_with(const Tensor& other) const {
  return defined() && other.defined() && impl_->buffer == other.impl_->buffer;
}

void* Tensor::raw_data() const {
  const Impl& i = impl();
  return static_cast<char*>(i.buffer->data()) +
         i.offset * static_cast<int64_t>(dtype_size(i.dtype));
}

void Tensor::check_dtype_for_access(DType requested) const {
  if (requested != dtype()) {
    throw InvalidArgumentError(
        str_cat("data<", dtype_name(requested), ">: the tensor holds ", dtype_name(dtype())));
  }
}

void Tensor::throw_cannot_fill(size_t values, const Shape& shape) {
  throw InvalidArgumentError(
      str_cat("from_vector: ", values, " values cannot fill a tensor of shape ", shape));
}

void Tensor::throw_not_scalar() const {
  throw InvalidArgumentError(
      str_cat("item: tensor of shape ", shape(), " has ", numel(), " elements, not 1"));
}

Tensor Tensor::to_host_contiguous() const {
  Tensor t = *this;
  if (t.dtype() == DType::kBFloat16 || t.dtype() == DType::kFloat16)
    t = cadre::cast(t, DType::kFloat32);
  if (!t.device().is_cpu()) t = cadre::to_device(t, Device::cpu(0));
  return cadre::contiguous(t);
}

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

void Tensor::assign(const Tensor& source) {
  if (source.shape() != shape()) {
    throw InvalidArgumentError(
        str_cat("assign: source shape ", source.shape(), " differs from the target's ", shape()));
  }
  Tensor src = source;
  if (src.dtype() != dtype()) src = cadre::cast(src, dtype());
  if (src.device() != device()) src = cadre::to_device(src, device());
  if (src.shares_buffer_with(*this)) {
    if (src.offset() == offset() && src.strides() == strides()) return;
    src = cadre::clone(src);  // another view of this memory: the copy must not overlap itself
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
