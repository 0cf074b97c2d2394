// IDX files (MNIST's format), plain or gzipped: a header whose dimensions claim a size.
#include <cstdint>

#include "cadre/base/errors.h"
#include "cadre/io/idx.h"
#include "tests/fuzz/memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cadre::fuzz::MemoryFile file(data, size);
  try {
    cadre::io::read_idx(file.path());
  } catch (const cadre::Error&) {
  }
  return 0;
}
