// Grid-stride launches of per-element functors (the bodies in core/backend/portable/).
// For .cu files only.
#pragma once

#if !defined(__CUDACC__)
#error "core/backend/cuda/for_each.h is for CUDA sources"
#endif

#include <cuda_runtime.h>

#include <cstdint>

#include "core/backend/cuda/launch.h"

namespace cadre::backend::cuda {

template <typename F>
__global__ void for_each_kernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    f(i);
  }
}

// Runs f(i) for i in [0, n) on `device`'s compute stream; `what` names the kernel in errors.
template <typename F>
void for_each(Device device, int64_t n, const F& f, const char* what) {
  if (n <= 0) return;
  for_each_kernel<<<grid_for(n), kBlock, 0, stream_of(device)>>>(n, f);
  check(cudaGetLastError(), what);
}

}  // namespace cadre::backend::cuda
