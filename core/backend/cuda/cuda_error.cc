#include "core/backend/cuda/cuda_error.h"

#include "cadre/base/errors.h"
#include "core/base/strings.h"

namespace cadre::backend::cuda {

void check(cublasStatus_t status, std::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::string message = str_cat(call, " failed: ", cublasGetStatusName(status), " (",
                                cublasGetStatusString(status), ")");
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw ResourceExhaustedError(message);
  throw InternalError(message);
}

void check(cudnnStatus_t status, std::string_view call) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  std::string message = str_cat(call, " failed: ", cudnnGetErrorString(status));
  if (status == CUDNN_STATUS_ALLOC_FAILED) throw ResourceExhaustedError(message);
  throw InternalError(message);
}

}  // namespace cadre::backend::cuda
