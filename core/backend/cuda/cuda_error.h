// Turns CUDA runtime and cuBLAS failures into Cadre's typed errors, naming the call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string_view>
#include "cadre/base/errors.h"

namespace cadre::backend::cuda {

// Throws ResourceExhaustedError for out-of-memory, InternalError otherwise.
void check(cudaError_t status, std::string_view call);
void check(cublasStatus_t status, std::string_view call);

}  // namespace cadre::backend::cuda
