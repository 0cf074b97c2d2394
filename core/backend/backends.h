// Registration of every backend built into this library.
#pragma once

namespace cadre::backend {

// Fills the kernel slots of the CPU backend and, when built with CUDA, of the CUDA backend.
// Called once, through kernels::ensure_backends_registered().
void register_all();

namespace cpu {
void register_backend();
}
namespace cuda {
void register_backend();
}

}  // namespace cadre::backend
