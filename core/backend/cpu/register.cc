// The CPU kernels' registration. (The cpu:N devices themselves, host memory and copies, are
// the tensor layer's: core/tensor/cpu/device_backend.h.)
#include <cblas.h>

#include "core/backend/backends.h"
#include "core/backend/cpu/kernels.h"

namespace cadre::backend::cpu {

void register_backend() {
  // OpenBLAS's own pool would run beside the intra-op pool and oversubscribe the cores;
  // Cadre calls it from inside its budget instead.
  openblas_set_num_threads(1);
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

}  // namespace cadre::backend::cpu
