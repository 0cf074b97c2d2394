#include "core/tensor/cuda/cuda_error.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::backend::cuda {

void check(cudaError_t status, std::string_view call) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear the sticky error state of non-fatal failures
  std::string message =
      str_cat(call, " failed: ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
  if (status == cudaErrorMemoryAllocation) throw ResourceExhaustedError(message);
  throw InternalError(message);
}

}  // namespace cadre::backend::cuda
