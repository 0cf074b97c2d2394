// Copies of tensors within a device, between devices and between dtypes, recorded on no
// gradient tape: the building blocks of Tensor's own methods (core/kernels/tensor_methods.cc),
// of transfers, of the tape's sums of gradients, and of the differentiable copies in
// core/ops, which add the recording.
#pragma once

#include "cadre/tensor/tensor.h"

namespace cadre::kernels {

// A new contiguous tensor on x's device with x's elements.
Tensor clone_raw(const Tensor& x);
// x itself when contiguous, else clone_raw(x).
Tensor contiguous_raw(const Tensor& x);
// x itself when of `dtype`, else a new contiguous tensor converted to it (as cadre::cast).
Tensor cast_raw(const Tensor& x, DType dtype);
// x itself when on `device` (which must exist), else a new contiguous tensor there.
Tensor to_device_raw(const Tensor& x, Device device);
// Copies the bytes of contiguous `src` into contiguous `dst` of the same shape and dtype on
// another device (between two GPUs through the host); returns when they are there.
void copy_across_devices(const Tensor& src, Tensor& dst);

}  // namespace cadre::kernels
