#include "core/backend/backends.h"

namespace cadre::backend {

void register_all() {
  cpu::register_backend();
#if CADRE_WITH_CUDA
  cuda::register_backend();
#endif
}

}  // namespace cadre::backend
