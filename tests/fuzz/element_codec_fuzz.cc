// Encoded elements: what iterator state and file caches hold.
#include <cstdint>
#include <string_view>

#include "cadre/base/errors.h"
#include "io/element_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    cadre::io::decode_elements(bytes, "fuzz");
  } catch (const cadre::Error&) {
  }
  try {
    size_t offset = 0;
    while (offset < bytes.size()) cadre::io::decode_element(bytes, offset, "fuzz");
  } catch (const cadre::Error&) {
  }
  return 0;
}
