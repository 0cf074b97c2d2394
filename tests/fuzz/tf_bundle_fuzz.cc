// The .index file of a TensorFlow checkpoint: its table (blocks, checksums, handles, prefix-
// compressed keys) and the bundle entries in it.
#include <cstdint>
#include <string_view>

#include "cadre/base/errors.h"
#include "checkpoint/tf_bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    cadre::checkpoint::internal::parse_tf_bundle_index(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.index");
  } catch (const cadre::Error&) {
  }
  return 0;
}
