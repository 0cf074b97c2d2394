// export.json, the signatures of an exported model that Predictor::load reads.
#include <cstdint>
#include <string>

#include "cadre/base/errors.h"
#include "estimator/export_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    cadre::estimator_internal::parse_export_description(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const cadre::Error&) {
  }
  return 0;
}
