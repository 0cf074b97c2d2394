// Host-side helpers shared by the CUDA kernels: the device's compute stream, the current
// device for a scope, and grid sizes.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cadre/tensor/device.h"
#include "cadre/tensor/tensor.h"
#include "core/backend/cuda/cuda_error.h"
#include "core/kernels/elementwise.h"
#include "core/tensor/cuda/device_runtime.h"

namespace cadre::backend::cuda {

inline constexpr int kBlock = 256;

// Blocks for a grid-stride loop over n elements: enough to fill an H100 (132 SMs, 2048
// threads each) several times over, no more.
inline unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kBlock - 1) / kBlock, 1, 8192));
}

// The stream every kernel of `device` runs on.
inline cudaStream_t stream_of(Device device) { return runtime(device.index).compute(); }

// Makes `device` current for the scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device.index) check(cudaSetDevice(device.index), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

template <typename T>
const T* ptr(const Tensor& t) {
  return static_cast<const T*>(t.raw_data());
}
template <typename T>
T* mut(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// out = act(out + bias) over the rows of out's last dimension (bias may be undefined).
void bias_activation_epilogue(Tensor& out, const Tensor& bias, kernels::Activation act,
                              double alpha);

}  // namespace cadre::backend::cuda
