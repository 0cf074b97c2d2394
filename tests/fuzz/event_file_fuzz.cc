// TensorBoard event files: TFRecord framing around Event protocol buffers.
#include <cstdint>

#include "cadre/base/errors.h"
#include "cadre/io/event_file.h"
#include "tests/fuzz/memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cadre::fuzz::MemoryFile file(data, size);
  try {
    cadre::io::read_event_file(file.path());
  } catch (const cadre::Error&) {
  }
  return 0;
}
