// The CUDA kernels' registration. (The gpu:N devices themselves, their memory and copies,
// are the tensor layer's: core/tensor/cuda/device_backend.h.)
#include "core/backend/backends.h"
#include "core/backend/cuda/kernels.h"

namespace cadre::backend::cuda {

void register_backend() {
  register_elementwise_kernels();
  register_activation_kernels();
  register_reduction_kernels();
  register_matmul_kernels();
  register_softmax_kernels();
  register_conv_kernels();
  register_pool_kernels();
  register_batch_norm_kernels();
  register_index_kernels();
  register_random_kernels();
  register_optimizer_kernels();
}

}  // namespace cadre::backend::cuda
