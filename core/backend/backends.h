// Registration of every backend built into this library.
#pragma once

namespace cadre::backend {

// Registers the CPU backend and, when built with CUDA, the CUDA backend: device backends
// and kernels. Called once, through kernels::ensure_backends_registered().
void register_all();

namespace cpu {
void register_backend();
}
namespace cuda {
void register_backend();
}

}  // namespace cadre::backend
