// Registration of the CUDA backend's kernels, one function per kernel family.
#pragma once

namespace cadre::backend::cuda {

void register_elementwise_kernels();
void register_matmul_kernels();

}  // namespace cadre::backend::cuda
