// TFRecord framing: lengths, masked CRCs, records cut short.
#include <cstdint>

#include "cadre/base/errors.h"
#include "cadre/io/tfrecord.h"
#include "tests/fuzz/memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cadre::fuzz::MemoryFile file(data, size);
  try {
    cadre::io::TFRecordReader reader(file.path());
    while (reader.read()) {
    }
  } catch (const cadre::Error&) {
  }
  return 0;
}
