// The `checkpoint` state file (TensorFlow's CheckpointState in text format).
#include <cstdint>
#include <string_view>

#include "cadre/base/errors.h"
#include "cadre/checkpoint/state_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    cadre::checkpoint::parse_state(std::string_view(reinterpret_cast<const char*>(data), size),
                                   "fuzz");
  } catch (const cadre::Error&) {
  }
  return 0;
}
