// A copy that the thread about to overwrite its source makes in the same pass: `bytes` of
// `from` go to `to` before any of them is written. An optimizer's fused update copies each
// chunk out just before its rule writes it, while the chunk is in cache, for a checkpoint
// that still needs the old values (core/nn/deferred_copy.h hands them out).
#pragma once

#include <cstddef>
#include <cstring>

namespace cadre::kernels {

struct CopyOut {
  const void* from;
  void* to;
  size_t bytes;

  void make() const { std::memcpy(to, from, bytes); }
};

}  // namespace cadre::kernels
