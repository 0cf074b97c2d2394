// Turns CUDA runtime, cuBLAS and cuDNN failures into Cadre's typed errors, naming the call.
// The runtime's overload belongs to the tensor layer (core/tensor/cuda/cuda_error.h), which
// meets those failures first.
#pragma once

#include <cublas_v2.h>
#include <cudnn_graph.h>

#include <string_view>

#include "core/tensor/cuda/cuda_error.h"

namespace cadre::backend::cuda {

// Throw ResourceExhaustedError for out-of-memory, InternalError otherwise.
void check(cublasStatus_t status, std::string_view call);
void check(cudnnStatus_t status, std::string_view call);

}  // namespace cadre::backend::cuda
