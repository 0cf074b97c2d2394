// Turns CUDA runtime, cuBLAS and cuDNN failures into Cadre's typed errors, naming the call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn_graph.h>

#include <string_view>

#include "cadre/base/errors.h"

namespace cadre::backend::cuda {

// Throws ResourceExhaustedError for out-of-memory, InternalError otherwise.
void check(cudaError_t status, std::string_view call);
void check(cublasStatus_t status, std::string_view call);
void check(cudnnStatus_t status, std::string_view call);

}  // namespace cadre::backend::cuda
