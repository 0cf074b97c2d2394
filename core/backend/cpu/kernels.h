// Registration of the CPU backend's kernels, one function per kernel family (one .cc file
// each).
#pragma once

namespace cadre::backend::cpu {

void register_elementwise_kernels();
void register_activation_kernels();
void register_reduction_kernels();
void register_matmul_kernels();
void register_softmax_kernels();
void register_conv_kernels();
void register_pool_kernels();
void register_batch_norm_kernels();
void register_index_kernels();
void register_random_kernels();
void register_optimizer_kernels();

}  // namespace cadre::backend::cpu
