#include "core/kernels/copies.h"

#include <cstring>

#include "core/kernels/elementwise.h"
#include "core/tensor/device_backend.h"

namespace cadre::kernels {

Tensor clone_raw(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  copy.call(x.device(), x, out);
  return out;
}

Tensor contiguous_raw(const Tensor& x) { return x.is_contiguous() ? x : clone_raw(x); }

Tensor cast_raw(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  cast.call(x.device(), x, out);
  return out;
}

Tensor to_device_raw(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  check_device(device);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device);
  copy_across_devices(contiguous_raw(x), out);
  return out;
}

void copy_across_devices(const Tensor& src, Tensor& dst) {
  size_t bytes = src.nbytes();
  if (bytes == 0) return;
  Device from = src.device(), to = dst.device();
  if (from.is_cpu() && to.is_cpu()) {
    std::memcpy(dst.raw_data(), src.raw_data(), bytes);
  } else if (from.is_cpu()) {
    device_backend(to.type)->copy_from_host(to.index, src.raw_data(), dst.raw_data(), bytes);
  } else if (to.is_cpu()) {
    device_backend(from.type)->copy_to_host(from.index, src.raw_data(), dst.raw_data(), bytes);
  } else {  // between two GPUs: stage through the host
    Tensor host = Tensor::empty(src.shape(), src.dtype(), Device::cpu(0));
    copy_across_devices(src, host);
    copy_across_devices(host, dst);
  }
}

}  // namespace cadre::kernels
