// CADRE_HOST_DEVICE marks functions that nvcc compiles for both the host and the GPU; the
// host compiler sees plain inline functions. Headers that use it hold the arithmetic that
// CUDA kernels and host code (CPU kernels, unit tests) must share bit for bit.
#pragma once

#if defined(__CUDACC__)
#define CADRE_HOST_DEVICE __host__ __device__
#else
#define CADRE_HOST_DEVICE
#endif
