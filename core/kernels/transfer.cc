#include "core/kernels/transfer.h"

#include <cstring>

#include "cadre/base/errors.h"
#include "core/base/strings.h"
#include "core/kernels/copies.h"
#include "core/tensor/caching_allocator.h"

namespace cadre {

Transfer::Pending::~Pending() {
  try {
    event->wait();
  } catch (const std::exception&) {
    // The copy's error was for the handles' owners to see; the memory is safe to free now.
  }
}

Tensor empty_pinned(const Shape& shape, DType dtype) {
  DeviceBackend* gpu = device_backend(DeviceType::kGPU);
  Allocator& allocator = gpu != nullptr ? gpu->pinned_host_allocator() : cpu_allocator();
  size_t bytes = static_cast<size_t>(shape.num_elements()) * dtype_size(dtype);
  void* data = allocator.allocate(bytes);
  return Tensor::from_blob(data, shape, dtype, Device::cpu(0),
                           [&allocator, data, bytes] { allocator.deallocate(data, bytes); });
}

AsyncCopy to_device_async(const Tensor& src, Device device) {
  if (!src.defined()) throw InvalidArgumentError("to_device_async: the source is undefined");
  if (src.device() == device) return {src, Transfer()};
  if (!src.device().is_cpu()) {
    throw InvalidArgumentError(
        str_cat("to_device_async: the source must be on the host, not ", src.device()));
  }
  check_device(device);
  Tensor host = kernels::contiguous_raw(src);
  Tensor out = Tensor::empty(src.shape(), src.dtype(), device);
  if (out.nbytes() == 0) return {out, Transfer()};
  std::unique_ptr<CopyEvent> event =
      device_backend(device.type)
          ->copy_from_host_async(device.index, host.raw_data(), out.raw_data(), out.nbytes());
  return {out, Transfer(std::move(event), {host, out})};
}

Transfer to_host_async(const Tensor& src, const Tensor& dst) {
  if (!src.defined() || !dst.defined()) {
    throw InvalidArgumentError("to_host_async: the source or the destination is undefined");
  }
  if (!dst.device().is_cpu() || !dst.is_contiguous()) {
    throw InvalidArgumentError(
        str_cat("to_host_async: the destination must be a contiguous host "
                "tensor, got one on ",
                dst.device()));
  }
  if (src.shape() != dst.shape() || src.dtype() != dst.dtype()) {
    throw InvalidArgumentError(str_cat("to_host_async: source ", src.dtype(), src.shape(),
                                       " does not fit destination ", dst.dtype(), dst.shape()));
  }
  Tensor from = kernels::contiguous_raw(src);  // on src's device, queued before the copy
  if (dst.nbytes() == 0) return Transfer();
  Device device = from.device();
  if (device.is_cpu()) {
    if (from.raw_data() != dst.raw_data())
      std::memcpy(dst.raw_data(), from.raw_data(), dst.nbytes());
    return Transfer();
  }
  std::unique_ptr<CopyEvent> event =
      device_backend(device.type)
          ->copy_to_host_async(device.index, from.raw_data(), dst.raw_data(), dst.nbytes());
  return Transfer(std::move(event), {from, dst});
}

}  // namespace cadre
