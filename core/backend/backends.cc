#include "core/backend/backends.h"

#include "core/kernels/registry.h"

namespace cadre {

void backend::register_all() {
  cpu::register_backend();
#if CADRE_WITH_CUDA
  cuda::register_backend();
#endif
}

// The backends know which of them are built, so the registry's entry point is theirs.
void kernels::ensure_backends_registered() {
  static const bool registered = (backend::register_all(), true);
  (void)registered;
}

}  // namespace cadre
