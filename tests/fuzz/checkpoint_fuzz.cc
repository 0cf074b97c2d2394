// Checkpoint files: every dataset read and checked. Damage must become DataLossError.
#include <cstdint>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/reader.h"
#include "tests/fuzz/memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cadre::fuzz::MemoryFile file(data, size);
  try {
    auto reader = cadre::checkpoint::CheckpointReader::open(file.path());
    reader->attributes();
    for (const auto& [name, info] : reader->variables()) reader->read(name);
    reader->iterator_state(/*verify=*/true);
    reader->rng_states(/*verify=*/true);
    reader->verify();
  } catch (const cadre::Error&) {
  }
  return 0;
}
