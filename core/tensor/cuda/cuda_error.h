// Turns CUDA runtime failures into Cadre's typed errors, naming the call. (cuBLAS and cuDNN
// failures, which only the kernels meet: core/backend/cuda/cuda_error.h.)
#pragma once

#include <cuda_runtime.h>

#include <string_view>

namespace cadre::backend::cuda {

// Throws ResourceExhaustedError for out-of-memory, InternalError otherwise.
void check(cudaError_t status, std::string_view call);

}  // namespace cadre::backend::cuda
