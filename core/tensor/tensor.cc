// The tensor layer's part of Tensor: creation of uninitialised or copied-in tensors, views
// and metadata. The methods that compute are defined where computation is: those that fill,
// write or read values run kernels (core/kernels/tensor_methods.cc), and the differentiable
// transformations are ops (core/ops/tensor_methods.cc).
#include "cadre/tensor/tensor.h"

#include <atomic>
#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
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

Tensor Tensor::from_bytes(const void* data, const Shape& shape, DType dtype) {
  Device device = default_device();
  Tensor out = empty(shape, dtype, device);
  if (out.nbytes() == 0) return out;
  if (device.is_cpu()) {
    std::memcpy(out.raw_data(), data, out.nbytes());
  } else {
    device_backend(device.type)->copy_from_host(device.index, data, out.raw_data(), out.nbytes());
  }
  return out;
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

}  // namespace cadre
